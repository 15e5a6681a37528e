// Resolution of a matrix's repo/branches into commits, worktrees and results attributes,
// against a real fixture git repository with two branches.
#include "matrix/branch_resolution.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <type_traits>
#include <utility>

#include "matrix/resolved_matrix.h"
#include "results/reader.h"
#include "results/store.h"
#include "tests/unit/common/git_test_fixture.h"
#include "tests/unit/common/results_store_test_util.h"

namespace scalebench {
namespace {

using testing::FixtureRepo;
using testing::write_file;

/// A matrix next to the fixture repo (`repo: repo`, relative to the matrix's folder).
std::filesystem::path write_branch_matrix(const FixtureRepo& fixture) {
  const auto path = fixture.root.path() / "m.yaml";
  write_file(path,
             "name: branches\n"
             "repo: repo\n"
             "branches: [main, feature]\n"
             "sweep:\n"
             "  batch_sizes: [4, 8]\n"
             "experiments:\n"
             "  - name: a\n"
             "    model: mlp\n");
  return path;
}

TEST(BranchResolution, RepoPathIsRelativeToTheMatrixFolder) {
  const FixtureRepo fixture;
  const ExpandedMatrix matrix = load_matrix(write_branch_matrix(fixture));
  EXPECT_EQ(std::filesystem::weakly_canonical(matrix_repo_path(matrix)),
            std::filesystem::weakly_canonical(fixture.repo));
}

TEST(BranchResolution, UrlRepoIsRefused) {
  ExpandedMatrix matrix;
  matrix.path = "m.yaml";
  matrix.repo = "https://example.org/model.git";
  EXPECT_THROW(matrix_repo_path(matrix), InputError);
  matrix.repo = "git@example.org:model.git";
  EXPECT_THROW(matrix_repo_path(matrix), InputError);
}

TEST(BranchResolution, CellsGetTheirBranchCommitAndNewIds) {
  const FixtureRepo fixture;
  const auto path = write_branch_matrix(fixture);
  const ExpandedMatrix checked = load_matrix(path);  // `validate`: no git, no commits
  ASSERT_EQ(checked.cells.size(), 4U);
  std::set<std::string> unresolved_ids;
  for (const auto& cell : checked.cells) {
    EXPECT_TRUE(cell.commit.empty());
    unresolved_ids.insert(cell.cell_id);
  }
  const auto commits = resolve_matrix_commits(checked);
  ASSERT_EQ(commits.size(), 2U);
  EXPECT_EQ(commits.at("main"), fixture.main_commit);
  EXPECT_EQ(commits.at("feature"), fixture.feature_commit);
  const ResolvedMatrix matrix = resolve_matrix(path, {});
  std::set<std::string> resolved_ids;
  for (const auto& cell : matrix.cells()) {
    EXPECT_EQ(cell.commit, commits.at(cell.branch));
    EXPECT_EQ(cell.cell_id, compute_cell_id(cell));
    EXPECT_EQ(unresolved_ids.count(cell.cell_id), 0U) << "the id must include the commit";
    resolved_ids.insert(cell.cell_id);
  }
  EXPECT_EQ(resolved_ids.size(), 4U);
  ASSERT_EQ(matrix.cell_ids().size(), 4U);
  EXPECT_EQ(matrix.cell_ids().front(), matrix.cells().front().cell_id);
  EXPECT_TRUE(matrix.branches().at("main").worktree.empty()) << "read-only: no worktree";
}

// Note [Resolve once]: a resolved matrix hands out its cells only as const, and only
// resolve_matrix makes one, so no field can change after the id was computed from it.
TEST(BranchResolution, ResolvedCellsCannotBeChanged) {
  using Cells = decltype(std::declval<ResolvedMatrix&>().cells());
  static_assert(std::is_same_v<Cells, const std::vector<CellSpec>&>);
  using Matrix = decltype(std::declval<ResolvedMatrix&>().matrix());
  static_assert(std::is_same_v<Matrix, const ExpandedMatrix&>);
  static_assert(!std::is_constructible_v<ResolvedMatrix, ExpandedMatrix,
                                         std::map<std::string, ResolvedBranch>>);
  static_assert(!std::is_default_constructible_v<ResolvedMatrix>);
  SUCCEED();
}

TEST(BranchResolution, CheckoutMakesOneWorktreePerBranch) {
  const FixtureRepo fixture;
  const ResolvedMatrix matrix =
      resolve_matrix(write_branch_matrix(fixture), {.limits = {}, .work_dir = fixture.work});
  const auto& branches = matrix.branches();
  ASSERT_EQ(branches.size(), 2U);
  const ResolvedBranch& main = branches.at("main");
  const ResolvedBranch& feature = branches.at("feature");
  EXPECT_EQ(main.commit, fixture.main_commit);
  EXPECT_EQ(feature.commit, fixture.feature_commit);
  EXPECT_NE(main.worktree, feature.worktree);
  EXPECT_TRUE(std::filesystem::exists(feature.worktree / "b.txt"));
  EXPECT_FALSE(std::filesystem::exists(main.worktree / "b.txt"));
  EXPECT_FALSE(main.commit_date_iso.empty());
  EXPECT_FALSE(main.dirty);
  for (const auto& cell : matrix.cells()) {
    EXPECT_EQ(cell.commit, branches.at(cell.branch).commit);
  }
}

TEST(BranchResolution, DirtyCheckoutOfTheBenchmarkedCommitIsReported) {
  const FixtureRepo fixture;
  write_file(fixture.repo / "a.txt", "edited, not committed\n");
  const ExpandedMatrix matrix = load_matrix(write_branch_matrix(fixture));
  const auto branches = checkout_matrix_branches(matrix, fixture.work);
  EXPECT_TRUE(branches.at("main").dirty);  // main is checked out in repo and edited
  EXPECT_FALSE(branches.at("feature").dirty);
}

TEST(BranchResolution, UnknownRefNamesTheMatrixAndIndex) {
  const FixtureRepo fixture;
  const auto path = fixture.root.path() / "m.yaml";
  write_file(path,
             "repo: repo\nbranches: [main, nope]\nsweep:\n  batch_sizes: [4]\n"
             "experiments:\n  - name: a\n    model: mlp\n");
  const ExpandedMatrix matrix = load_matrix(path);
  try {
    resolve_matrix_commits(matrix);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("branches[1]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos) << e.what();
  }
}

// Issue 54: every bad ref of the file at once, each at its line:column with the closest of the
// repository's own names, and no worktree made before they are all known.
TEST(BranchResolution, EveryUnknownRefAtItsLineWithTheClosestNameAndNothingCheckedOut) {
  const FixtureRepo fixture;
  const auto path = fixture.root.path() / "m.yaml";
  write_file(path,
             "repo: repo\nbranches: [main, featur, nope-at-all]\nsweep:\n  batch_sizes: [4]\n"
             "experiments:\n  - name: a\n    model: mlp\n");
  const ExpandedMatrix matrix = load_matrix(path);
  const auto work = fixture.root.path() / "m.h5.work";
  for (const bool checkout : {false, true}) {
    try {
      if (checkout) {
        checkout_matrix_branches(matrix, work);
      } else {
        resolve_matrix_commits(matrix);
      }
      FAIL() << "expected InputError";
    } catch (const InputError& e) {
      const std::string text = e.what();
      EXPECT_NE(text.find(path.string() + ":2:18: branches[1]: ref featur names no commit"),
                std::string::npos)
          << text;
      EXPECT_NE(text.find("did you mean feature?"), std::string::npos) << text;
      EXPECT_NE(text.find(path.string() + ":2:26: branches[2]: ref nope-at-all"), std::string::npos)
          << text;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(work / "worktrees")) << "a worktree before the refusal";
}

// Note [Refs beside file errors]: a schema error and a misspelt branch in one file are said
// in one pass, each at its line:column, the ref with the closest name.
TEST(BranchResolution, ABadRefIsReportedBesideTheFilesOwnErrors) {
  const FixtureRepo fixture;
  const auto path = fixture.root.path() / "m.yaml";
  write_file(path,
             "repo: repo\nbranches: [main, featur]\nsweep:\n  batch_sizes: [4]\n"
             "  world_sizes: 2\nexperiments:\n  - name: a\n    model: mlp\n");
  try {
    load_matrix(path);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string text = e.what();
    const auto ref = text.find(path.string() + ":2:18: branches[1]: ref featur names no commit");
    const auto schema = text.find(path.string() + ":5:");
    EXPECT_NE(ref, std::string::npos) << text;
    EXPECT_NE(text.find("did you mean feature?"), std::string::npos) << text;
    EXPECT_NE(schema, std::string::npos) << text;
    EXPECT_LT(ref, schema) << "in the file's order: " << text;
  }
  // A repo: that is no checkout's top adds nothing (validate checks refs there only).
  write_file(path,
             "repo: elsewhere\nbranches: [main, featur]\nsweep:\n  batch_sizes: [4]\n"
             "  world_sizes: 2\nexperiments:\n  - name: a\n    model: mlp\n");
  try {
    load_matrix(path);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find("featur"), std::string::npos) << e.what();
  }
}

TEST(BranchResolution, StoreWritesCommitDateAndDirty) {
  const testing_util::TempDir dir;
  const auto path = dir.path() / "r.h5";
  ResultsStore store = ResultsStore::create(path, testing_util::test_provenance("h"), false);
  const CellSpec known = testing_util::train_cell(1);
  CellSpec other = testing_util::train_cell(2);
  other.commit = "fedcba9876543210fedcba9876543210fedcba98";
  other = finalize_cell_id(other);
  store.set_commit_info({{known.commit, {"2024-05-06T07:08:09+02:00", true}}});
  store.mark_running(known, {1, 2});
  store.mark_skipped(other, "too big");
  const auto cells = read_results_overview(path).at("cells");
  EXPECT_EQ(cells.at(known.cell_id).at("commit_date"), "2024-05-06T07:08:09+02:00");
  EXPECT_EQ(cells.at(known.cell_id).at("dirty"), 1);
  EXPECT_EQ(cells.at(other.cell_id).at("commit_date"), "");
  EXPECT_EQ(cells.at(other.cell_id).at("dirty"), 0);
}

}  // namespace
}  // namespace scalebench
