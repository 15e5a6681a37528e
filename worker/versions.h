// Versions of the libraries the worker links, for the results file's provenance.
#pragma once

#include <map>
#include <string>

namespace scalebench {

/// {"torch": "2.x.y", "cuda": "12.8" (CUDA runtime, "" on a CPU build),
///  "nccl": "2.21.5" ("" without NCCL)}. Safe to call before any GPU is touched.
std::map<std::string, std::string> library_versions();

}  // namespace scalebench
