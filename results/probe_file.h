// The file `scalebench probe -o FILE` writes (docs/probe.md#the-probe-file): one HDF5 file
// per probe, read by `scalebench analyze`.
#pragma once

#include <filesystem>

#include "common/cell/probe_report.h"

namespace scalebench {

inline constexpr const char* kProbeLayoutVersion = "1.0";

/// Writes `report` to `path` atomically (a temporary sibling renamed over it).
void write_probe_file(const std::filesystem::path& path, const ProbeReport& report);

/// The nccl-tests style table of `report`, with the plain-MPI comparison where measured.
std::string format_probe_table(const ProbeReport& report);

}  // namespace scalebench
