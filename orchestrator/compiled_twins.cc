// Rank 0's exports of the compile axis' twins. See Note [Compiled twins] in
// orchestrator/compiled_twins.h.
#include "orchestrator/compiled_twins.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <system_error>

#include "common/base/build_info.h"
#include "common/base/logging.h"
#include "common/base/subprocess.h"
#include "common/cell/zoo_names.h"
#include "common/matrix/branch_prepare.h"

namespace scalebench {
namespace {

/// PYTHONPATH for the export: the source tree's client package first (a build run from its
/// source tree needs nothing installed), then what the environment had.
std::string client_python_path() {
  const auto client = build_info::source_dir() / "protocol" / "client";
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

/// The export command of `cell`'s twin in `folder`.
std::vector<std::string> export_argv(const CellSpec& cell, const TwinExportContext& context,
                                     const std::filesystem::path& folder,
                                     const std::string& device) {
  std::vector<std::string> argv = {
      context.python, "-m",      "scalebench_client.export",    "--zoo",
      cell.model.zoo, "--state", (folder / "state.pt").string()};
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

/// Exports one twin into `folder` (state, then the Python export); "" when it is there,
/// else the reason the cells of the twin fail.
std::string export_twin(const CellSpec& cell, const TwinExportContext& context,
                        const std::filesystem::path& folder, const std::string& device) {
  const auto file = folder / twin_file_name(cell);
  std::error_code error;
  if (std::filesystem::is_regular_file(file.string() + ".json", error)) {
    SB_LOG(info) << "compile: " << cell.compile << " twin of " << cell.model.zoo << " reused from "
                 << file.string();
    return "";
  }
  std::filesystem::create_directories(folder);
  const std::string what = "the " + cell.compile + " twin of zoo model " + cell.model.zoo +
                           " (compile: " + cell.compile + ", Note [Compiled twins])";
  if (context.python.empty()) {
    return what +
           " cannot be made: no Python interpreter with torch to export with; set "
           "SCALEBENCH_PYTHON=/path/to/.venv/bin/python (setup.sh builds with one)";
  }
  if (!context.write_zoo_state) {
    return what + " cannot be made: this build has no worker library to write the model's state";
  }
  try {
    context.write_zoo_state(cell, context.tree_of(cell).string(), (folder / "state.pt").string());
  } catch (const std::exception& e) {
    return what + ": the eager model's state could not be written: " + e.what();
  }
  const auto argv = export_argv(cell, context, folder, device);
  SB_LOG(info) << "compile: exporting " << what << " for " << device << ": " << quote_argv(argv);
  std::vector<std::pair<std::string, std::string>> environment;
  if (const auto path = client_python_path(); !path.empty())
    environment.emplace_back("PYTHONPATH", path);
  const PrepareOutcome result =
      run_prepare(argv, folder, kTwinExportTimeoutS, folder / "export.log", environment);
  if (!result.ok()) return what + " could not be exported: " + result.reason;
  if (!std::filesystem::is_regular_file(file.string() + ".json", error)) {
    return what + ": the export exited 0 but wrote no " + file.string() + ".json (see " +
           (folder / "export.log").string() + ")";
  }
  std::filesystem::remove(folder / "state.pt", error);  // made again when needed
  SB_LOG(info) << "compile: " << what << " exported in " << result.wall_s << " s";
  return "";
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
                     const std::filesystem::path& checkpoint, const std::string& torch_version) {
  nlohmann::json facts = {{"zoo", cell.model.zoo},           {"input_shape", input_shape_of(cell)},
                          {"num_classes", classes_of(cell)}, {"seed", cell.seed},
                          {"compile", cell.compile},         {"device", device},
                          {"torch", torch_version},          {"scalebench", build_info::kVersion}};
  if (!checkpoint.empty()) {
    std::error_code error;
    const auto size = std::filesystem::file_size(checkpoint, error);
    const auto mtime = std::filesystem::last_write_time(checkpoint, error);
    facts["checkpoint"] = {{"path", checkpoint.string()},
                           {"size", error ? 0 : size},
                           {"mtime", error ? 0 : mtime.time_since_epoch().count()}};
  }
  std::array<char, 17> hex{};
  std::snprintf(hex.data(), hex.size(), "%016llx",
                static_cast<unsigned long long>(fnv1a64(facts.dump())));
  return {hex.data(), 16};
}

TwinExportOutcome export_compiled_twins(std::vector<CellSpec> to_run,
                                        const TwinExportContext& context, ResultSink& sink) {
  TwinExportOutcome outcome;
  std::map<std::string, std::string> tried;  // twin folder -> "" or the reason: one try each
  std::vector<CellSpec> kept;
  for (auto& cell : to_run) {
    if (cell.compile == CellSpec{}.compile) {
      kept.push_back(std::move(cell));
      continue;
    }
    const std::string device = twin_device(cell, context.workers_have_gpu);
    const auto checkpoint = cell.checkpoint.empty()
                                ? std::filesystem::path()
                                : resolve_in_tree(context.tree_of(cell), cell.checkpoint);
    const auto folder =
        context.work_dir / "compiled" / twin_key(cell, device, checkpoint, context.torch_version);
    auto found = tried.find(folder.string());
    if (found == tried.end()) {
      found = tried.emplace(folder.string(), export_twin(cell, context, folder, device)).first;
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
  outcome.to_run = std::move(kept);
  return outcome;
}

}  // namespace scalebench
