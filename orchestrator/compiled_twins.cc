// Rank 0's exports of the compile axis' twins. See Note [Compiled twins] in
// orchestrator/compiled_twins.h.
#include "orchestrator/compiled_twins.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <system_error>

#include "common/base/build_info.h"
#include "common/base/error.h"
#include "common/base/logging.h"
#include "common/base/subprocess.h"
#include "common/cell/zoo_names.h"
#include "matrix/branch_prepare.h"

namespace scalebench {
namespace {

std::string hex16(uint64_t value) {
  std::array<char, 17> hex{};
  std::snprintf(hex.data(), hex.size(), "%016llx", static_cast<unsigned long long>(value));
  return {hex.data(), 16};
}

/// "the aoti twin of zoo model mlp (compile: aoti, Note [Compiled twins])".
std::string twin_words(const CellSpec& cell) {
  return "the " + cell.compile + " twin of zoo model " + cell.model.zoo +
         " (compile: " + cell.compile + ", Note [Compiled twins])";
}

/// PYTHONPATH for the export: the source tree's client package first (a build run from its
/// source tree needs nothing installed), then what the environment had.
std::string client_python_path() {
  const auto client = build_info::source_dir() / "program" / "client";
  const char* existing = std::getenv("PYTHONPATH");
  std::string path;
  std::error_code error;
  if (std::filesystem::is_directory(client / "scalebench_client", error)) path = client.string();
  if (existing != nullptr && *existing != '\0')
    path += (path.empty() ? "" : ":") + std::string(existing);
  return path;
}

/// The cell's input shape and classes, the zoo's defaults where the matrix is silent.
std::vector<int64_t> input_shape_of(const CellSpec& cell) {
  const ZooModelInfo* zoo = find_zoo_model(cell.model.zoo);
  return cell.input_shape.empty() && zoo != nullptr ? zoo->default_shape : cell.input_shape;
}
int64_t classes_of(const CellSpec& cell) {
  const ZooModelInfo* zoo = find_zoo_model(cell.model.zoo);
  return cell.num_classes == 0 && zoo != nullptr ? zoo->default_classes : cell.num_classes;
}

/// The export command of `cell`'s twin in `folder`, from the weights in `state`.
std::vector<std::string> export_argv(const CellSpec& cell, const TwinExportContext& context,
                                     const std::filesystem::path& folder, const std::string& device,
                                     const std::filesystem::path& state) {
  std::vector<std::string> argv = {context.python, "-m",           "scalebench_client.export",
                                   "--zoo",        cell.model.zoo, "--state",
                                   state.string()};
  argv.emplace_back("--input-shape");
  for (const int64_t extent : input_shape_of(cell)) argv.push_back(std::to_string(extent));
  argv.emplace_back("--num-classes");
  argv.push_back(std::to_string(classes_of(cell)));
  argv.push_back(cell.compile == "aoti" ? "--aoti" : "--torchscript");
  argv.push_back((folder / twin_file_name(cell)).string());
  argv.emplace_back("--device");
  argv.push_back(device);
  return argv;
}

/// Exports one twin into `folder` from the eager weights in `state`; "" when it is there,
/// else the reason the cells of the twin fail.
std::string export_twin(const CellSpec& cell, const TwinExportContext& context,
                        const std::filesystem::path& folder, const std::string& device,
                        const std::filesystem::path& state) {
  const auto file = folder / twin_file_name(cell);
  std::error_code error;
  if (std::filesystem::is_regular_file(file.string() + ".json", error)) {
    SB_LOG(info) << "compile: " << cell.compile << " twin of " << cell.model.zoo << " reused from "
                 << file.string();
    return "";
  }
  std::filesystem::create_directories(folder, error);
  if (error) return "cannot create " + folder.string() + ": " + error.message();
  const std::string what = twin_words(cell);
  if (context.python.empty()) {
    return what +
           " cannot be made: no Python interpreter with torch to export with; set "
           "SCALEBENCH_PYTHON=/path/to/.venv/bin/python (setup.sh builds with one)";
  }
  const auto argv = export_argv(cell, context, folder, device, state);
  SB_LOG(info) << "compile: exporting " << what << " for " << device << ": " << quote_argv(argv);
  std::vector<std::pair<std::string, std::string>> environment;
  if (const auto path = client_python_path(); !path.empty()) {
    environment.emplace_back("PYTHONPATH", path);
  }
  const PrepareOutcome result =
      run_prepare(argv, folder, kTwinExportTimeoutS, folder / "export.log", environment);
  if (!result.ok()) return what + " could not be exported: " + result.reason;
  if (!std::filesystem::is_regular_file(file.string() + ".json", error)) {
    return what + ": the export exited 0 but wrote no " + file.string() + ".json (see " +
           (folder / "export.log").string() + ")";
  }
  SB_LOG(info) << "compile: " << what << " exported in " << result.wall_s << " s";
  return "";
}

/// fnv1a64 of a file's bytes as 16 hex digits; "" when it cannot be read.
std::string file_digest(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return in ? hex16(fnv1a64(bytes)) : "";
}

/// The eager weights of one (zoo model, shapes, seed, checkpoint), written once per export
/// step: the twins of every compile value of that model are made from it, and its digest
/// enters their key.
struct EagerState {
  std::filesystem::path path;
  std::string digest;
  std::string problem;  ///< why it could not be written ("" when written)
};

EagerState write_eager_state(const CellSpec& cell, const TwinExportContext& context,
                             const std::filesystem::path& folder, const std::string& name) {
  EagerState state;
  state.path = folder / (name + ".pt");
  if (!context.write_zoo_state) {
    state.problem = twin_words(cell) +
                    " cannot be made: this build has no worker library to write the model's state";
    return state;
  }
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  try {
    if (error) throw Error("cannot create " + folder.string() + ": " + error.message());
    context.write_zoo_state(cell, context.tree_of(cell).string(), state.path.string());
    state.digest = file_digest(state.path);
    if (state.digest.empty()) throw Error("cannot read back " + state.path.string());
  } catch (const std::exception& e) {
    state.problem =
        twin_words(cell) + ": the eager model's state could not be written: " + e.what();
  }
  return state;
}

}  // namespace

std::string twin_device(const CellSpec& cell, bool workers_have_gpu) {
  if (cell.compile == "torchscript") return "cpu";  // a trace runs on any device
  switch (cell.device) {
    case Device::kCpu:
      return "cpu";
    case Device::kCuda:
      return "cuda";
    case Device::kAuto:
      break;
  }
  return workers_have_gpu ? "cuda" : "cpu";
}

std::string twin_file_name(const CellSpec& cell) {
  return cell.compile == "aoti" ? "model.pt2" : "model.ts";
}

std::string twin_key(const CellSpec& cell, const std::string& device,
                     const std::string& state_digest, const std::string& torch_version) {
  const nlohmann::json facts = {
      {"zoo", cell.model.zoo},
      {"input_shape", input_shape_of(cell)},
      {"num_classes", classes_of(cell)},
      {"compile", cell.compile},
      {"device", device},
      {"state", state_digest},
      {"torch", torch_version},
      // The C++ model and its Python twin change together, in a commit.
      {"build", std::string(build_info::kGitCommit) + (build_info::kGitDirty ? "+dirty" : "")}};
  return hex16(fnv1a64(facts.dump()));
}

TwinExportOutcome export_compiled_twins(std::vector<CellSpec> to_run,
                                        const TwinExportContext& context, ResultSink& sink) {
  TwinExportOutcome outcome;
  std::map<std::string, std::string> tried;  // twin folder -> "" or the reason: one try each
  std::map<std::string, EagerState> states;  // the weights' identity -> their file
  const auto states_folder = context.work_dir / "compiled" / "states";
  std::vector<CellSpec> kept;
  for (auto& cell : to_run) {
    if (cell.compile == CellSpec{}.compile) {
      kept.push_back(std::move(cell));
      continue;
    }
    const std::string device = twin_device(cell, context.workers_have_gpu);
    // The weights' identity: what the eager model is built and loaded from.
    const nlohmann::json identity = {
        {"zoo", cell.model.zoo},
        {"input_shape", input_shape_of(cell)},
        {"num_classes", classes_of(cell)},
        {"seed", cell.seed},
        {"checkpoint", cell.checkpoint.empty()
                           ? std::string()
                           : resolve_in_tree(context.tree_of(cell), cell.checkpoint).string()}};
    const std::string weights = identity.dump();
    auto state = states.find(weights);
    if (state == states.end()) {
      state = states
                  .emplace(weights,
                           write_eager_state(cell, context, states_folder, hex16(fnv1a64(weights))))
                  .first;
    }
    if (!state->second.problem.empty()) {
      sink.finish_without_results(cell, CellStatus::kFailed, FailurePhase::kPrepare,
                                  state->second.problem);
      ++outcome.failed_cells;
      continue;
    }
    const auto folder = context.work_dir / "compiled" /
                        twin_key(cell, device, state->second.digest, context.torch_version);
    auto found = tried.find(folder.string());
    if (found == tried.end()) {
      found = tried
                  .emplace(folder.string(),
                           export_twin(cell, context, folder, device, state->second.path))
                  .first;
      if (!found->second.empty()) SB_LOG(warning) << "compile: " << found->second;
    }
    const std::string& reason = found->second;
    if (!reason.empty()) {
      sink.finish_without_results(cell, CellStatus::kFailed, FailurePhase::kPrepare, reason);
      ++outcome.failed_cells;
      continue;
    }
    outcome.twins[cell.cell_id] = folder / twin_file_name(cell);
    kept.push_back(std::move(cell));
  }
  std::error_code error;
  std::filesystem::remove_all(states_folder, error);  // the twins hold the weights now
  outcome.to_run = std::move(kept);
  return outcome;
}

}  // namespace scalebench
