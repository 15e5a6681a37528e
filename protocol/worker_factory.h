// What the Torch-free layers need from the worker library, injected by the `scalebench`
// executable (app/main.cc) or by tests (a fake CellRunner).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "protocol/cell_runner.h"

namespace scalebench {

struct WorkerFactory {
  /// Makes this rank's CellRunner (called once per worker rank, after MPI_Init).
  std::function<std::unique_ptr<CellRunner>()> make_runner;
  /// Library versions for provenance: keys "torch", "cuda", "nccl" (values "" when unused).
  std::function<std::map<std::string, std::string>()> library_versions;
};

}  // namespace scalebench
