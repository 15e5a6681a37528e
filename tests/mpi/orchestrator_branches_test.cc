// `scalebench run` over a matrix with repo/branches (run_cli on every rank, fake CellRunner,
// a real fixture git repository with branches `main` and `feature`): each cell carries its
// branch's commit, commit date and dirty flag; prepare steps run once per branch and a
// failing one marks only that branch's cells failed in phase `prepare`.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "orchestrator/commands.h"
#include "protocol/mpi_comm.h"
#include "results/reader.h"
#include "results/store.h"
#include "run_fake_cli.h"
#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;

/// The fixture repository on rank 0 only; every rank gets its root folder.
class SharedFixture {
 public:
  SharedFixture() {
    std::string root;
    if (world_rank() == 0) {
      fixture_ = std::make_unique<testing::FixtureRepo>();
      root = fixture_->root.path().string();
    }
    int size = static_cast<int>(root.size());
    MPI_Bcast(&size, 1, MPI_INT, 0, MPI_COMM_WORLD);
    root.resize(static_cast<size_t>(size));
    MPI_Bcast(root.data(), size, MPI_CHAR, 0, MPI_COMM_WORLD);
    root_ = root;
  }
  ~SharedFixture() { MPI_Barrier(MPI_COMM_WORLD); }
  SharedFixture(const SharedFixture&) = delete;
  SharedFixture& operator=(const SharedFixture&) = delete;

  [[nodiscard]] const fs::path& root() const { return root_; }
  /// Rank 0 only.
  [[nodiscard]] const testing::FixtureRepo& repo() const { return *fixture_; }

  void write_matrix(const std::string& name, const std::string& text) const {
    if (world_rank() == 0) testing::write_file(root_ / name, text);
    MPI_Barrier(MPI_COMM_WORLD);
  }

 private:
  std::unique_ptr<testing::FixtureRepo> fixture_;
  fs::path root_;
};

using testing_fake::run_fake_cli;

constexpr const char* kMatrixHead = R"(name: branches
repo: repo
branches: [main, feature]
defaults: {device: cpu, backend: mpi, warmup: 1, iterations: 3, timeout_s: 60}
sweep: {modes: [train], batch_sizes: [4], world_sizes: [1]}
)";

TEST(RunBranches, CellsCarryTheirBranchCommit) {
  const SharedFixture fixture;
  fixture.write_matrix("m.yaml", std::string(kMatrixHead) +
                                     "experiments:\n"
                                     "  - {name: mlp, model: mlp, input_shape: [16], "
                                     "num_classes: 2}\n");
  const fs::path out = fixture.root() / "r.h5";
  EXPECT_EQ(run_fake_cli({(fixture.root() / "m.yaml").string(), "-o", out.string(), "--quiet"}),
            kExitOk);
  if (world_rank() != 0) return;
  const auto& repo = fixture.repo();
  const std::map<std::string, std::string> expected{{"main", repo.main_commit},
                                                    {"feature", repo.feature_commit}};
  const auto cells = read_results_overview(out).at("cells");
  ASSERT_EQ(cells.size(), 2U);
  std::set<std::string> commits;
  for (const auto& [id, cell] : cells.items()) {
    const std::string branch = cell.at("branch");
    EXPECT_EQ(cell.at("status"), "ok") << id;
    EXPECT_EQ(cell.at("commit"), expected.at(branch));
    EXPECT_EQ(cell.at("spec").at("commit"), expected.at(branch));
    EXPECT_EQ(cell.at("spec").at("cell_id"), id);
    EXPECT_FALSE(cell.at("commit_date").get<std::string>().empty());
    EXPECT_EQ(cell.at("dirty"), 0);
    commits.insert(cell.at("commit").get<std::string>());
    EXPECT_TRUE(fs::exists(out.string() + ".work/worktrees/" + expected.at(branch).substr(0, 12)));
  }
  EXPECT_EQ(commits.size(), 2U);
}

TEST(RunBranches, FailingPrepareFailsOnlyItsBranch) {
  const SharedFixture fixture;
  // b.txt exists on `feature` only: `cat b.txt` fails in main's worktree.
  fixture.write_matrix("m.yaml", std::string(kMatrixHead) +
                                     "prepare: [cat, b.txt]\n"
                                     "prepare_timeout_s: 30\n"
                                     "experiments:\n"
                                     "  - {name: mlp, model: mlp, input_shape: [16], "
                                     "num_classes: 2}\n");
  const fs::path out = fixture.root() / "r.h5";
  const fs::path logs = fixture.root() / "logs";
  EXPECT_EQ(run_fake_cli({(fixture.root() / "m.yaml").string(), "-o", out.string(), "--log-dir",
                          logs.string(), "--quiet"}),
            kExitCellsFailed);
  if (world_rank() != 0) return;
  const auto cells = read_results_overview(out).at("cells");
  ASSERT_EQ(cells.size(), 2U);
  for (const auto& [id, cell] : cells.items()) {
    if (cell.at("branch") == "main") {
      EXPECT_EQ(cell.at("status"), "failed");
      EXPECT_EQ(cell.at("failed_phase"), "prepare");
      EXPECT_NE(cell.at("reason").get<std::string>().find("b.txt"), std::string::npos)
          << cell.at("reason");
    } else {
      EXPECT_EQ(cell.at("status"), "ok") << cell.at("reason");
    }
  }
  EXPECT_NE(testing::read_file(logs / "prepare-main.log").find("b.txt"), std::string::npos);
  EXPECT_NE(testing::read_file(logs / "prepare-feature.log").find("feature"), std::string::npos);
}

TEST(RunBranches, ExperimentPrepareReplacesTheTopLevelOne) {
  const SharedFixture fixture;
  fixture.write_matrix("m.yaml", std::string(kMatrixHead) +
                                     "prepare: [cat, b.txt]\n"
                                     "experiments:\n"
                                     "  - {name: mlp, model: mlp, input_shape: [16], "
                                     "num_classes: 2, prepare: [./prepare.sh, own]}\n");
  const fs::path out = fixture.root() / "r.h5";
  const fs::path logs = fixture.root() / "logs";
  EXPECT_EQ(run_fake_cli({(fixture.root() / "m.yaml").string(), "-o", out.string(), "--log-dir",
                          logs.string(), "--quiet"}),
            kExitOk);
  if (world_rank() != 0) return;
  EXPECT_NE(testing::read_file(logs / "prepare-main.log").find("prepare on main: own"),
            std::string::npos);
  EXPECT_NE(testing::read_file(logs / "prepare-feature.log").find("prepare on feature: own"),
            std::string::npos);
}

}  // namespace
}  // namespace scalebench
