// `scalebench plan` (through run_cli, in process) on a matrix whose experiment comes from the
// branch trees: the cells of each branch come from its own configs/experiment/<name>.yaml.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "orchestrator/cli.h"
#include "orchestrator/commands.h"
#include "tests/unit/common/git_test_fixture.h"
#include "tests/unit/orchestrator/captured_cli.h"

namespace scalebench {
namespace {

using testing::FixtureRepo;
using testing::git_in;
using testing::write_file;

using testing::CliResult;

/// `scalebench <args...>`, output captured.
CliResult run(std::vector<std::string> args) { return testing::run_captured(std::move(args)); }

void commit_experiment(const std::filesystem::path& repo, const std::string& branch,
                       const std::string& text) {
  git_in(repo, {"checkout", "-q", branch});
  write_file(repo / "configs/experiment/im2im/segmentation.yaml", text);
  git_in(repo, {"add", "--", "configs/experiment/im2im/segmentation.yaml"});
  git_in(repo, {"commit", "-q", "-m", "segmentation on " + branch});
  git_in(repo, {"checkout", "-q", "main"});
}

TEST(PlanTreeExperiments, PlanExpandsEachBranchFromItsOwnFile) {
  const FixtureRepo fixture;
  commit_experiment(fixture.repo, "main", "model: unet3d\ninput_shape: [1, 32, 32, 32]\n");
  commit_experiment(fixture.repo, "feature", "model: unet3d\ninput_shape: [1, 64, 64, 64]\n");
  const auto matrix = fixture.root.path() / "m.yaml";
  write_file(matrix,
             "repo: repo\n"
             "branches: [main, feature]\n"
             "sweep: {batch_sizes: [2]}\n"
             "experiments:\n"
             "  - experiment: im2im/segmentation\n"
             "    iterations: 3\n");
  const CliResult validate = run({"validate", matrix.string()});
  EXPECT_EQ(validate.status, kExitOk) << validate.err;
  EXPECT_NE(validate.out.find("1 experiment from the branch trees (im2im/segmentation"),
            std::string::npos)
      << validate.out;
  const CliResult plan = run({"plan", matrix.string(), "--format", "json"});
  ASSERT_EQ(plan.status, kExitOk) << plan.err;
  const auto cells = nlohmann::json::parse(plan.out);
  ASSERT_EQ(cells.size(), 2U) << plan.out;
  for (const auto& cell : cells) {
    EXPECT_EQ(cell["experiment"], "im2im/segmentation");
    EXPECT_EQ(cell["measured_iterations"], 3);
    const int64_t depth = cell["branch"] == "main" ? 32 : 64;
    EXPECT_EQ(cell["input_shape"], (std::vector<int64_t>{1, depth, depth, depth})) << cell;
    EXPECT_EQ(cell["commit"].get<std::string>().size(), 40U);
  }
  const CliResult table = run({"plan", matrix.string()});
  EXPECT_EQ(table.status, kExitOk) << table.err;
  EXPECT_NE(table.out.find("im2im/segmentation"), std::string::npos) << table.out;
}

TEST(PlanTreeExperiments, ProblemsInABranchsFileAreBadInput) {
  const FixtureRepo fixture;
  commit_experiment(fixture.repo, "main", "model: unet3d\nbatch_sizes: [2]\n");
  commit_experiment(fixture.repo, "feature", "model: unet3d\nbatch_sizes: [0]\n");
  const auto matrix = fixture.root.path() / "m.yaml";
  write_file(matrix,
             "repo: repo\n"
             "branches: [main, feature]\n"
             "experiments:\n"
             "  - experiment: im2im/segmentation\n"
             "  - experiment: missing\n");
  const CliResult plan = run({"plan", matrix.string()});
  EXPECT_EQ(plan.status, kExitBadInput);
  EXPECT_TRUE(plan.out.empty()) << plan.out;
  EXPECT_NE(plan.err.find("feature:configs/experiment/im2im/segmentation.yaml:2:15: "
                          "batch_sizes[0]: '0' is too small"),
            std::string::npos)
      << plan.err;
  EXPECT_NE(plan.err.find("configs/experiment/missing.yaml does not exist in ref main"),
            std::string::npos)
      << plan.err;
  EXPECT_NE(plan.err.find("configs/experiment/missing.yaml does not exist in ref feature"),
            std::string::npos)
      << plan.err;
}

}  // namespace
}  // namespace scalebench
