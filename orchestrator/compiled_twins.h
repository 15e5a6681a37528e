// Rank 0 of `scalebench run`: the twins of the compile axis, exported once before any of
// their cells is dispatched.
//
// Note [Compiled twins]
// ~~~~~~~~~~~~~~~~~~~~~
// `compile: [eager, torchscript, aoti]` measures what compilation buys for a zoo model's
// inference, over the same weights: `eager` runs the LibTorch modules; `torchscript` and
// `aoti` run the model as a user deploys it, a torch.jit.trace file or an AOTInductor
// package (torch.export + aoti_compile_and_package). After the matrix's prepare steps (a
// checkpoint may be what they write), rank 0 makes each distinct twin once:
//   1. the state of the eager model (WorkerFactory::write_zoo_state: the cell's seed's
//      weights, its checkpoint loaded), once per model, seed and checkpoint, so that every
//      cell of the axis runs the same weights;
//   2. `python -m scalebench_client.export --zoo NAME --state FILE ...`: the Python twin of
//      the zoo model (scalebench_client/zoo.py: the same module names and forward) loads
//      that state strictly and is exported for the cell's device (`auto`: cuda when a worker
//      reported a GPU; the export runs on rank 0's node, which then needs that GPU too), with
//      a dynamic batch.
// Each twin lives in <work dir>/compiled/<key>/ with its log; the key hashes what the twin
// is made of: the zoo name, input shape and classes, compile, device, the workers' torch
// version, the build's commit (the C++ model and its Python twin change together) and the
// digest of the weights' file, which is written again at every run (seconds) so that a new
// checkpoint or initialisation is never served an old twin. A twin whose sidecar
// (`<file>.json`, written last) exists is reused: a rerun or --resume exports nothing. The
// twin's bytes travel with the cell as a TorchScript file's do (Assignment::artifact), and
// the worker validates the twin against the eager model in fp32 (worker/compiled_twin.h), so
// a cell's accuracy verdict says whether compilation kept the outputs. An export that fails
// fails the cells of that twin in phase `prepare` (the command, the log and its tail); the
// other cells run. The Python is the analysis' (SCALEBENCH_PYTHON), whose torch must be the
// LibTorch the workers link (setup.sh and the GPU kit make it so), as TorchScript and
// AOTInductor need.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/cell/messages.h"
#include "orchestrator/orchestrator.h"
#include "orchestrator/prepare_steps.h"
#include "protocol/worker_factory.h"

namespace scalebench {

/// Seconds an export may take (an AOTInductor compile of a ResNet-50 on two CPU cores takes
/// minutes).
inline constexpr double kTwinExportTimeoutS = 3600.0;

/// What an export needs besides the cells.
struct TwinExportContext {
  std::filesystem::path work_dir;  ///< the twins go to <work_dir>/compiled/<key>/
  std::string python;              ///< interpreter with torch (python_interpreter())
  std::string torch_version;       ///< the workers' LibTorch (part of the key)
  bool workers_have_gpu = false;   ///< resolves device auto
  /// Writes the eager model's state (WorkerFactory::write_zoo_state); empty: cells fail.
  decltype(WorkerFactory::write_zoo_state) write_zoo_state;
  /// `cell`'s tree (CellInputs::tree_of), against which its checkpoint resolves.
  std::function<std::filesystem::path(const CellSpec&)> tree_of;
};

/// The device a twin of `cell` is exported for: "cpu" or "cuda".
std::string twin_device(const CellSpec& cell, bool workers_have_gpu);

/// The folder name of `cell`'s twin: 16 hex digits over what the twin is made of (see the
/// Note); `state_digest` is the digest of the eager weights' file. Pure.
std::string twin_key(const CellSpec& cell, const std::string& device,
                     const std::string& state_digest, const std::string& torch_version);

/// The file of `cell`'s twin inside its folder: "model.ts" or "model.pt2".
std::string twin_file_name(const CellSpec& cell);

struct TwinExportOutcome {
  std::vector<CellSpec> to_run;  ///< cells whose twin exists, and cells without compile
  size_t failed_cells = 0;       ///< recorded `failed` in phase `prepare`
  /// cell id -> the twin file of each compile cell in `to_run`.
  std::map<std::string, std::filesystem::path> twins;
};

/// Exports (or reuses) the twin of every cell of `to_run` whose compile is not eager, as
/// the Note says; a failed export records each of its cells through
/// `sink.finish_without_results(cell, failed, prepare, reason)` and drops them. Throws only
/// for infrastructure (a folder that cannot be made).
TwinExportOutcome export_compiled_twins(std::vector<CellSpec> to_run,
                                        const TwinExportContext& context, ResultSink& sink);

}  // namespace scalebench
