// The CPU model of this machine: in the results file's provenance and in each worker's hello
// to rank 0. In base/ so that the worker rank's loop (protocol/) needs nothing of results/.
#pragma once

#include <string>

namespace scalebench {

/// The CPU model of this machine from /proc/cpuinfo ("AMD EPYC 7B13": the first `model name`,
/// else the first `Hardware`, `Processor`, `cpu model` or `uarch` line, as Arm and other
/// kernels name it), or "" when none is there.
std::string cpu_model_name();

/// cpu_model_name's parser, on the text of a /proc/cpuinfo.
std::string cpu_model_from_cpuinfo(const std::string& cpuinfo);

}  // namespace scalebench
