// What the Torch-free layers need from the worker library, injected by the `scalebench`
// executable (app/main.cc) or by tests (a fake CellRunner).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "protocol/cell_runner.h"
#include "protocol/collective_probe.h"
#include "protocol/self_test.h"

namespace scalebench {

struct WorkerFactory {
  /// Makes this rank's CellRunner (called once per worker rank, after MPI_Init).
  std::function<std::unique_ptr<CellRunner>()> make_runner;
  /// Library versions for provenance: keys "torch", "cuda", "nccl" (values "" when unused).
  std::function<std::map<std::string, std::string>()> library_versions;
  /// Makes this rank's CollectiveProbe (`scalebench probe`, `selftest`); empty in builds or
  /// tests without the worker library.
  std::function<std::unique_ptr<CollectiveProbe>()> make_probe;
  /// Makes this rank's SelfTest (`scalebench selftest`); empty like make_probe.
  std::function<std::unique_ptr<SelfTest>()> make_self_test;
  /// Whether this build's LibTorch has the AOTInductor package loader (LibTorch 2.6 or
  /// newer): `validate` warns about `model: {aoti: ...}` cells when it has not. Empty:
  /// unknown (builds and tests without the worker library), no warning.
  std::function<bool()> aoti_loader_available;
  /// Writes the state of the zoo model a `compile: eager` cell would run (its seed's
  /// weights, its checkpoint loaded; `tree` as Assignment::tree) to a file Python's
  /// torch.load reads: rank 0 exports the compile axis' twins from it (Note [Compiled
  /// twins] in orchestrator/compiled_twins.h). Empty in builds and tests without the
  /// worker library: such cells then fail in phase prepare, saying so.
  std::function<void(const CellSpec& cell, const std::string& tree, const std::string& path)>
      write_zoo_state;
};

}  // namespace scalebench
