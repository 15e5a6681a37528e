// `scalebench run` with the real LibTorch worker over a fixture git repository whose two
// branches export different TorchScript models in their prepare step (the venv's Python
// running docs/examples/own_model/export_model.py): each cell records its branch's commit
// and its own model's parameter count, for training and inference; inference cells read
// an HDF5 dataset and a torch.save checkpoint from the branch tree, report their load
// times, and produce the output checksum that Python computes for the same rows and
// weights. A cell whose TorchScript file is missing fails in phase `inputs` alone.
// With `baseline: {branch: main}`, validated inference cells are compared with main's
// (Note [Accuracy across cells]): branch `same` (main's model, another commit) passes,
// branch `wide` (another model) fails naming mae_rel, and main keeps its in-cell check.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/base/build_info.h"
#include "common/hdf5/wrappers.h"
#include "orchestrator/cli.h"
#include "orchestrator/commands.h"
#include "orchestrator/run_options.h"
#include "protocol/mpi_comm.h"
#include "results/reader.h"
#include "results/store.h"
#include "run_real_cli.h"
#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;

constexpr const char* kExportScript = "docs/examples/own_model/export_model.py";

/// repo/ with branch `main` (export_model.py as documented, HIDDEN = [32]), branch
/// `wide` (HIDDEN = [64, 64]) and branch `same` (main's script with a comment added).
struct OwnModelRepo {
  testing::TempDir root;
  fs::path repo = root.path() / "repo";
  std::map<std::string, std::string> commits;

  OwnModelRepo() {
    const std::string script = testing::read_file(fs::path(build_info::kSourceDir) / kExportScript);
    const std::string narrow_line = "HIDDEN = [32]";
    EXPECT_NE(script.find(narrow_line), std::string::npos) << "the example changed";
    std::string wide = script;
    wide.replace(wide.find(narrow_line), narrow_line.size(), "HIDDEN = [64, 64]");

    fs::create_directories(repo);
    testing::git_in(repo, {"init", "-q", "-b", "main"});
    testing::write_file(repo / "export_model.py", script);
    testing::git_in(repo, {"add", "export_model.py"});
    testing::git_in(repo, {"commit", "-q", "-m", "narrow model"});
    commits["main"] = testing::git_in(repo, {"rev-parse", "HEAD"});
    testing::git_in(repo, {"checkout", "-q", "-b", "wide"});
    testing::write_file(repo / "export_model.py", wide);
    testing::git_in(repo, {"commit", "-q", "-am", "wide model"});
    commits["wide"] = testing::git_in(repo, {"rev-parse", "HEAD"});
    testing::git_in(repo, {"checkout", "-q", "-b", "same", "main"});
    testing::write_file(repo / "export_model.py", script + "# the same model\n");
    testing::git_in(repo, {"commit", "-q", "-am", "a comment"});
    commits["same"] = testing::git_in(repo, {"rev-parse", "HEAD"});
    testing::git_in(repo, {"checkout", "-q", "main"});
  }
};

std::string matrix_text() {
  return std::string(R"(name: own-model
repo: repo
branches: [main, wide, same]
baseline: {branch: main}
prepare: [")") +
         build_info::kPython + R"(", export_model.py, --out, build]
prepare_timeout_s: 300
defaults: {device: cpu, backend: mpi, warmup: 3, iterations: 3, timeout_s: 120, seed: 3}
sweep: {modes: [train, infer], batch_sizes: [4], world_sizes: [1, 2]}
experiments:
  - name: own
    model: {torchscript: build/model.pt}
    input_shape: [16]
    num_classes: 3
  - name: own-data
    model: {torchscript: build/model.pt}
    input_shape: [16]
    num_classes: 3
    data: {hdf5: build/data.h5, inputs: inputs, targets: targets}
    checkpoint: build/weights.pt
    samples: 64
  - name: missing
    model: {torchscript: build/not-exported.pt}
    input_shape: [16]
    num_classes: 3
    modes: [infer]
    world_sizes: [1]
  - name: validated
    model: {torchscript: build/model.pt}
    input_shape: [16]
    num_classes: 3
    modes: [infer]
    validate: true
    validation_samples: 24
exclude:
  - {branch: same, experiment: own}
  - {branch: same, experiment: own-data}
  - {branch: same, experiment: missing}
)";
}

/// Per-rank metrics of a cell: name -> one value per group rank.
std::map<std::string, std::vector<double>> rank_metrics(const fs::path& file,
                                                        const std::string& cell_id) {
  const auto h5 = own_file(HDF5_CHECK(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  const auto cell = own_group(HDF5_CHECK(H5Gopen2(h5, ("/cells/" + cell_id).c_str(), H5P_DEFAULT)));
  const auto dims = h5::dataset_dims(cell, "rank_metrics");
  const auto values = h5::read_double_dataset(cell, "rank_metrics");
  const auto dataset = own_dataset(HDF5_CHECK(H5Dopen2(cell, "rank_metrics", H5P_DEFAULT)));
  const auto names = nlohmann::json::parse(h5::read_string_attribute(dataset, "names"))
                         .get<std::vector<std::string>>();
  std::map<std::string, std::vector<double>> metrics;
  for (size_t m = 0; m < names.size(); ++m) {
    for (size_t r = 0; r < dims[0]; ++r) metrics[names[m]].push_back(values[r * dims[1] + m]);
  }
  return metrics;
}

/// A `validated` cell (Note [Accuracy across cells]): main compared inside the cell with its
/// fp32 reference; `same` against main's outputs, passing; `wide`, another model, failing.
void check_validated(const nlohmann::json& cell, const std::string& branch) {
  const auto& accuracy = cell.at("accuracy");
  ASSERT_TRUE(accuracy.is_object()) << cell.dump();
  const auto checks = accuracy.at("failed_checks").dump();
  if (branch == "main") {
    EXPECT_EQ(accuracy.at("kind"), "inference");
    EXPECT_EQ(accuracy.at("verdict"), "passed") << checks;
    return;
  }
  EXPECT_EQ(accuracy.at("kind"), "outputs") << branch;
  EXPECT_NE(accuracy.at("reference").get<std::string>().find("branch main"), std::string::npos);
  EXPECT_EQ(accuracy.at("validation_samples"), 24);
  if (branch == "same") {
    EXPECT_EQ(accuracy.at("verdict"), "passed") << checks;
    EXPECT_EQ(accuracy.at("mae"), 0.0);
  } else {
    EXPECT_EQ(accuracy.at("verdict"), "failed");
    EXPECT_EQ(accuracy.at("failed_checks").at(0).get<std::string>().rfind("mae_rel ", 0), 0U)
        << checks;
  }
}

TEST(OwnModelRun, BranchesExportTheirOwnTorchScriptModelsDataAndCheckpoints) {
  if (std::string(build_info::kPython).empty()) GTEST_SKIP() << "no SCALEBENCH_PYTHON";
  std::unique_ptr<OwnModelRepo> fixture;
  if (world_rank() == 0) fixture = std::make_unique<OwnModelRepo>();
  const auto run = testing_real::run_matrix(
      fixture ? fixture->root.path() : std::filesystem::path(), matrix_text());
  EXPECT_EQ(run.status, kExitCellsFailed);  // the `missing` cells
  if (world_rank() != 0) return;
  const auto cells = read_results_overview(run.results()).at("cells");
  ASSERT_EQ(cells.size(), 2U * (4 + 4 + 1) + 3U * 2);
  std::map<std::string, double> parameters_by_branch;
  int checked_data_cells = 0;
  for (const auto& [id, cell] : cells.items()) {
    const std::string branch = cell.at("branch");
    const std::string experiment = cell.at("spec").at("experiment");
    const std::string commit = fixture->commits.at(branch);
    EXPECT_EQ(cell.at("commit"), commit) << id;
    if (experiment == "missing") {
      EXPECT_EQ(cell.at("status"), "failed") << id;
      EXPECT_EQ(cell.at("failed_phase"), "inputs") << id;
      EXPECT_NE(cell.at("reason").get<std::string>().find("build/not-exported.pt"),
                std::string::npos)
          << cell.at("reason");
      continue;
    }
    ASSERT_EQ(cell.at("status"), "ok") << id << ": " << cell.at("reason");
    if (experiment == "validated") {
      check_validated(cell, branch);
      continue;
    }
    const fs::path worktree = run.results().string() + ".work/worktrees/" + commit.substr(0, 12);
    const auto expected =
        nlohmann::json::parse(testing::read_file(worktree / "build" / "expected.json"));
    const auto metrics = rank_metrics(run.results(), id);
    const int world = cell.at("spec").at("world_size");
    ASSERT_EQ(metrics.at("parameter_count").size(), static_cast<size_t>(world));
    for (const double count : metrics.at("parameter_count")) {
      EXPECT_EQ(count, expected.at("parameter_count").get<double>()) << id;
    }
    parameters_by_branch[branch] = metrics.at("parameter_count")[0];
    EXPECT_FALSE(metrics.contains("flops_per_sample")) << "TorchScript has no analytic FLOPs";
    if (cell.at("spec").at("mode") == "train") {
      for (const double loss : metrics.at("final_loss")) EXPECT_TRUE(std::isfinite(loss)) << id;
      // DDP keeps the replicas equal.
      const auto& checksums = metrics.at("param_checksum");
      for (const double checksum : checksums) EXPECT_DOUBLE_EQ(checksum, checksums[0]) << id;
      if (experiment == "own-data") {
        EXPECT_EQ(metrics.at("data_rows")[0], 64.0);
      }
      continue;
    }
    if (experiment != "own-data") {
      EXPECT_FALSE(metrics.contains("checkpoint_load_s")) << id;
      continue;
    }
    ++checked_data_cells;
    double checksum = 0.0;
    for (size_t r = 0; r < static_cast<size_t>(world); ++r) {
      EXPECT_GT(metrics.at("checkpoint_load_s")[r], 0.0) << id;
      EXPECT_GT(metrics.at("data_open_s")[r], 0.0) << id;
      EXPECT_EQ(metrics.at("data_rows")[r], 64.0) << id;
      checksum += metrics.at("output_checksum")[r];
    }
    // The rows of data.h5 through the checkpoint's weights, exactly as Python computes it.
    const double reference = expected.at("output_checksum").get<double>();
    EXPECT_NEAR(checksum, reference, 1e-5 * reference) << id;
  }
  EXPECT_EQ(checked_data_cells, 4);
  ASSERT_EQ(parameters_by_branch.size(), 2U);  // `same` runs only `validated`
  EXPECT_EQ(parameters_by_branch.at("main"), 16 * 32 + 32 + 32 * 3 + 3);
  EXPECT_EQ(parameters_by_branch.at("wide"), 16 * 64 + 64 + 64 * 64 + 64 + 64 * 3 + 3);
}

}  // namespace
}  // namespace scalebench
