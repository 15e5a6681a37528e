// Experiments read from the branch trees (configs/experiment/<name>.yaml), against a real
// fixture git repository whose branches hold different experiment files.
#include "matrix/tree_experiments.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/base/build_info.h"
#include "matrix/branch_resolution.h"
#include "matrix/git_repo.h"
#include "matrix/resolved_matrix.h"
#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

using testing::FixtureRepo;
using testing::git_in;
using testing::write_file;

constexpr const char* kMainSeg =
    "model: unet3d\n"
    "input_shape: [1, 32, 32, 32]\n"
    "batch_sizes: [2]\n";

constexpr const char* kFeatureSeg =
    "# the feature branch benchmarks a bigger volume\n"
    "model: unet3d\n"
    "input_shape: [1, 64, 64, 64]\n"
    "batch_sizes: [2, 4]\n"
    "iterations: 5\n";

/// Commits `files` (path -> text) on `branch` of `repo` (created from `from` when new).
void commit_files(const std::filesystem::path& repo, const std::string& branch,
                  const std::map<std::string, std::string>& files, const std::string& from = "") {
  if (from.empty()) {
    git_in(repo, {"checkout", "-q", branch});
  } else {
    git_in(repo, {"checkout", "-q", "-b", branch, from});
  }
  for (const auto& [path, text] : files) {
    write_file(repo / path, text);
    git_in(repo, {"add", "--", path});
  }
  git_in(repo, {"commit", "-q", "-m", "experiments on " + branch});
  git_in(repo, {"checkout", "-q", "main"});
}

/// The fixture repo, with configs/experiment/seg.yaml differing between main and feature.
struct TreeFixture {
  FixtureRepo fixture;
  TreeFixture() {
    commit_files(fixture.repo, "main", {{"configs/experiment/seg.yaml", kMainSeg}});
    commit_files(fixture.repo, "feature", {{"configs/experiment/seg.yaml", kFeatureSeg}});
  }
  /// A matrix next to the repo with `experiments` (YAML list items, 2-space indented).
  [[nodiscard]] std::filesystem::path matrix(const std::string& experiments,
                                             const std::string& branches = "[main, feature]",
                                             const std::string& extra = "") const {
    const auto path = fixture.root.path() / "m.yaml";
    write_file(path,
               "name: tree\n"
               "repo: repo\n"
               "branches: " +
                   branches +
                   "\n"
                   "sweep:\n"
                   "  batch_sizes: [1]\n" +
                   extra + "experiments:\n" + experiments);
    return path;
  }
};

/// resolve_matrix with read-only git, as `plan`.
ExpandedMatrix plan(const std::filesystem::path& path) { return resolve_matrix(path, {}).matrix(); }

std::vector<const CellSpec*> cells_of(const ExpandedMatrix& matrix, const std::string& experiment,
                                      const std::string& branch) {
  std::vector<const CellSpec*> cells;
  for (const auto& cell : matrix.cells) {
    if (cell.experiment == experiment && cell.branch == branch) cells.push_back(&cell);
  }
  return cells;
}

/// The MatrixError text of `action` ("" when it does not throw one).
template <typename Action>
std::string matrix_error(Action action) {
  try {
    action();
  } catch (const MatrixError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const std::string kInlineAndSeg =
    "  - name: inline\n"
    "    model: mlp\n"
    "  - experiment: seg\n";

TEST(TreeExperiments, LoadMatrixRunsNoGitAndSaysWhatPlanWillExpand) {
  const TreeFixture tree;
  const ExpandedMatrix matrix = load_matrix(tree.matrix(kInlineAndSeg));
  ASSERT_EQ(matrix.cells.size(), 2U);  // the inline experiment on both branches
  for (const auto& cell : matrix.cells) EXPECT_EQ(cell.experiment, "inline");
  EXPECT_EQ(matrix.tree_experiments, std::vector<std::string>{"seg"});
  EXPECT_FALSE(matrix.tree_experiments_resolved);
  const std::string summary = summarize(matrix);
  EXPECT_TRUE(contains(summary, "plus 1 experiment from the branch trees (seg")) << summary;
  EXPECT_TRUE(contains(summary, "expanded by plan and run")) << summary;
}

TEST(TreeExperiments, OnlyTreeExperimentsIsValidBeforeResolution) {
  const TreeFixture tree;
  const ExpandedMatrix matrix = load_matrix(tree.matrix("  - experiment: seg\n"));
  EXPECT_TRUE(matrix.cells.empty());
  EXPECT_TRUE(contains(summarize(matrix), "0 cells")) << summarize(matrix);
}

TEST(TreeExperiments, EachBranchsCellsComeFromItsOwnFile) {
  const TreeFixture tree;
  const ExpandedMatrix matrix = plan(tree.matrix(kInlineAndSeg));
  EXPECT_TRUE(matrix.tree_experiments_resolved);
  const auto on_main = cells_of(matrix, "seg", "main");
  const auto on_feature = cells_of(matrix, "seg", "feature");
  ASSERT_EQ(on_main.size(), 1U);
  ASSERT_EQ(on_feature.size(), 2U);
  EXPECT_EQ(on_main[0]->input_shape, (std::vector<int64_t>{1, 32, 32, 32}));
  EXPECT_EQ(on_main[0]->batch_size, 2);
  EXPECT_EQ(on_main[0]->measured_iterations, 10);
  for (const CellSpec* cell : on_feature) {
    EXPECT_EQ(cell->input_shape, (std::vector<int64_t>{1, 64, 64, 64}));
    EXPECT_EQ(cell->measured_iterations, 5);
    EXPECT_EQ(cell->model.zoo, "unet3d");
  }
  EXPECT_EQ(on_feature[0]->batch_size, 2);
  EXPECT_EQ(on_feature[1]->batch_size, 4);
  // Deterministic order: experiments in file order, then branches, as for inline ones.
  std::vector<std::string> order;
  for (const auto& cell : matrix.cells) order.push_back(cell.experiment + "@" + cell.branch);
  EXPECT_EQ(order, (std::vector<std::string>{"inline@main", "inline@feature", "seg@main",
                                             "seg@feature", "seg@feature"}));
  const auto commits = resolve_matrix_commits(matrix);
  std::set<std::string> ids;
  for (const auto& cell : matrix.cells) {
    EXPECT_EQ(cell.commit, commits.at(cell.branch));
    EXPECT_EQ(cell.cell_id, compute_cell_id(cell));
    if (cell.experiment == "seg") {
      EXPECT_EQ(cell.source, matrix.path.string() + ":9") << "the source is the matrix entry";
    }
    ids.insert(cell.cell_id);
  }
  EXPECT_EQ(ids.size(), matrix.cells.size());
}

TEST(TreeExperiments, ResolvingAgainGivesTheSameCells) {
  const TreeFixture tree;
  const auto path = tree.matrix(kInlineAndSeg);
  const ExpandedMatrix first = plan(path);
  const ExpandedMatrix second = plan(path);
  ASSERT_EQ(first.cells.size(), 5U);
  ASSERT_EQ(second.cells.size(), first.cells.size());
  for (size_t i = 0; i < first.cells.size(); ++i) {
    EXPECT_EQ(first.cells[i].cell_id, second.cells[i].cell_id);
  }
}

TEST(TreeExperiments, EntryKeysOverrideTheFile) {
  const TreeFixture tree;
  const ExpandedMatrix matrix =
      plan(tree.matrix("  - experiment: seg\n"
                       "    name: seg-small\n"
                       "    batch_sizes: [8]\n"
                       "    input_shape: [1, 16, 16, 16]\n"
                       "    precisions: [fp32, bf16]\n"));
  ASSERT_EQ(matrix.cells.size(), 4U);  // 2 branches x 1 batch size x 2 precisions
  for (const auto& cell : matrix.cells) {
    EXPECT_EQ(cell.experiment, "seg-small");
    EXPECT_EQ(cell.batch_size, 8);
    EXPECT_EQ(cell.input_shape, (std::vector<int64_t>{1, 16, 16, 16}));
    // Keys the entry does not write still come from each branch's file.
    EXPECT_EQ(cell.measured_iterations, cell.branch == "feature" ? 5 : 10);
  }
}

TEST(TreeExperiments, FileNameWinsOverTheDefaultAndSweepFillsTheGaps) {
  TreeFixture tree;
  commit_files(tree.fixture.repo, "main",
               {{"configs/experiment/im2im/segmentation.yaml", "name: unet\nmodel: mlp\n"}});
  const ExpandedMatrix matrix = plan(tree.matrix("  - experiment: im2im/segmentation\n", "[main]"));
  ASSERT_EQ(matrix.cells.size(), 1U);
  EXPECT_EQ(matrix.cells[0].experiment, "unet");
  EXPECT_EQ(matrix.cells[0].batch_size, 1);  // from sweep
  const ExpandedMatrix unnamed = plan(tree.matrix("  - experiment: seg\n", "[main]"));
  EXPECT_EQ(unnamed.cells.at(0).experiment, "seg");
}

TEST(TreeExperiments, MissingFileNamesEntryBranchCommitAndPath) {
  TreeFixture tree;
  commit_files(tree.fixture.repo, "feature",
               {{"configs/experiment/only_feature.yaml", "model: mlp\n"}});
  const auto path = tree.matrix(kInlineAndSeg + "  - experiment: only_feature\n");
  const ExpandedMatrix matrix = load_matrix(path);  // validate: fine, no git
  const auto commits = resolve_matrix_commits(matrix);
  const std::string message = matrix_error([&] { resolve_matrix(path, {}); });
  ASSERT_FALSE(message.empty());
  EXPECT_TRUE(contains(message, path.string() +
                                    ":10:17: experiments[2].experiment: "
                                    "configs/experiment/only_feature.yaml does not "
                                    "exist in ref main (commit " +
                                    commits.at("main")))
      << message;
  EXPECT_TRUE(contains(message, "Add the file to that branch")) << message;
  EXPECT_FALSE(contains(message, "ref feature")) << "feature has the file: " << message;
}

TEST(TreeExperiments, ProblemsInTheFilePointIntoItNamingTheBranch) {
  TreeFixture tree;
  commit_files(tree.fixture.repo, "broken",
               {{"configs/experiment/seg.yaml",
                 "model: unet3d\n"
                 "batch_sizes: [0]\n"
                 "iterashuns: 5\n"
                 "input_shape: [1, 30, 30, 30]\n"}},
               "main");
  const std::string message =
      matrix_error([&] { plan(tree.matrix("  - experiment: seg\n", "[main, feature, broken]")); });
  ASSERT_FALSE(message.empty());
  EXPECT_TRUE(contains(message, "broken:configs/experiment/seg.yaml:2:15: batch_sizes[0]: "))
      << message;
  EXPECT_TRUE(contains(message,
                       "broken:configs/experiment/seg.yaml:3:1: iterashuns: unknown "
                       "key 'iterashuns'; did you mean 'iterations'?"))
      << message;
  EXPECT_FALSE(contains(message, "main:")) << message;
  EXPECT_FALSE(contains(message, "feature:")) << message;
}

TEST(TreeExperiments, SemanticProblemsInTheFileAreReportedAtTheirKey) {
  TreeFixture tree;
  commit_files(tree.fixture.repo, "broken",
               {{"configs/experiment/seg.yaml",
                 "model: unet3d\n"
                 "batch_sizes: [2]\n"
                 "input_shape: [1, 30, 30, 30]\n"}},
               "main");
  const std::string message =
      matrix_error([&] { plan(tree.matrix("  - experiment: seg\n", "[main, broken]")); });
  EXPECT_TRUE(contains(message, "broken:configs/experiment/seg.yaml:3:14: input_shape: "))
      << message;
  // The entry's override replaces the bad shape: then it is fine.
  EXPECT_NO_THROW(plan(
      tree.matrix("  - experiment: seg\n    input_shape: [1, 32, 32, 32]\n", "[main, broken]")));
}

TEST(TreeExperiments, NotAMappingAndYamlSyntaxErrorsInTheFile) {
  TreeFixture tree;
  commit_files(tree.fixture.repo, "main",
               {{"configs/experiment/list.yaml", "- model: mlp\n"},
                {"configs/experiment/syntax.yaml", "model: [mlp\n"}});
  const std::string message = matrix_error(
      [&] { plan(tree.matrix("  - experiment: list\n  - experiment: syntax\n", "[main]")); });
  EXPECT_TRUE(contains(message,
                       "main:configs/experiment/list.yaml:1:1: an experiment file must "
                       "be a mapping"))
      << message;
  EXPECT_TRUE(contains(message, "main:configs/experiment/syntax.yaml:")) << message;
  EXPECT_TRUE(contains(message, "YAML syntax error")) << message;
}

TEST(TreeExperiments, TreeEntriesNeedRepoAndBranches) {
  const std::string message = matrix_error([] {
    load_matrix_text("m.yaml",
                     "sweep: {batch_sizes: [1]}\n"
                     "experiments:\n"
                     "  - experiment: seg\n");
  });
  EXPECT_TRUE(contains(message,
                       "m.yaml:3:17: experiments[0].experiment: experiment: seg reads "
                       "configs/experiment/seg.yaml from each branch's tree and needs "
                       "repo and branches"))
      << message;
}

TEST(TreeExperiments, HostileNamesAreRefusedBeforeAnyGit) {
  for (const std::string& name :
       std::vector<std::string>{"", "../secrets", "/etc/passwd", "a//b", "a/", "a b", "$(touch x)",
                                "a;b", "seg.yaml", "seg.yml", ".hidden", "a/.git/config", "a..b",
                                "a/../b", "x\ny", "a:b", "a\\b", "~root", std::string(201, 'a')}) {
    EXPECT_FALSE(tree_experiment_name_problem(name).empty()) << "accepted: " << name;
  }
  for (const std::string name : {"seg", "im2im/segmentation", "a_b-c+d.e", "v1.2/x"}) {
    EXPECT_EQ(tree_experiment_name_problem(name), "") << name;
  }
  // Through the matrix: every hostile name is an error at its key; nothing is read.
  for (const std::string name : {"../secrets", "a..b", "seg.yaml", "'a b'", "\"$(touch x)\""}) {
    const std::string message = matrix_error([&] {
      load_matrix_text("m.yaml",
                       "repo: .\n"
                       "branches: [main]\n"
                       "sweep: {batch_sizes: [1]}\n"
                       "experiments:\n"
                       "  - experiment: " +
                           name + "\n");
    });
    EXPECT_TRUE(contains(message, "m.yaml:5:17: experiments[0].experiment: ")) << message;
    EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 0) << message;
  }
  EXPECT_TRUE(contains(tree_experiment_name_problem("seg.yaml"), "scalebench adds .yaml"));
}

TEST(TreeExperiments, UnknownKeyOnTheEntryIsASchemaError) {
  const std::string message = matrix_error([] {
    load_matrix_text("m.yaml",
                     "repo: .\n"
                     "branches: [main]\n"
                     "experiments:\n"
                     "  - experiment: seg\n"
                     "    bach_sizes: [1]\n");
  });
  EXPECT_TRUE(contains(message,
                       "m.yaml:5:5: experiments[0].bach_sizes: unknown key "
                       "'bach_sizes'; did you mean 'batch_sizes'?"))
      << message;
  EXPECT_TRUE(contains(message, "experiment")) << message;
  // An inline entry still needs its model, and lists `experiment` among the allowed keys.
  const std::string inline_message = matrix_error(
      [] { load_matrix_text("m.yaml", "experiments:\n  - name: x\n    modell: mlp\n"); });
  EXPECT_TRUE(contains(inline_message, "missing required key 'model'")) << inline_message;
  EXPECT_TRUE(contains(inline_message, "did you mean 'model'?")) << inline_message;
}

TEST(TreeExperiments, ExcludesApplyToTreeCellsAndUnmatchedRulesWarnAfterResolution) {
  const TreeFixture tree;
  const auto path = tree.matrix("  - experiment: seg\n", "[main, feature]",
                                "exclude:\n"
                                "  - {experiment: seg, branch: feature, batch_size: 4}\n"
                                "  - {experiment: nothing}\n");
  EXPECT_TRUE(load_matrix(path).warnings.empty()) << "deferred until the tree cells are known";
  const ExpandedMatrix matrix = plan(path);
  const auto& added = matrix.warnings;
  ASSERT_EQ(added.size(), 1U);
  EXPECT_TRUE(contains(added[0], path.string() + ":8:5:")) << added[0];
  EXPECT_TRUE(contains(added[0], "matches no cell")) << added[0];
  ASSERT_EQ(matrix.cells.size(), 2U);  // main 2; feature 2 (4 excluded)
  for (const auto& cell : matrix.cells) EXPECT_EQ(cell.batch_size, 2);
}

TEST(TreeExperiments, NamesMustStayUniquePerBranch) {
  TreeFixture tree;
  const std::string message = matrix_error([&] {
    plan(
        tree.matrix("  - name: seg\n"
                    "    model: mlp\n"
                    "  - experiment: seg\n"));
  });
  EXPECT_TRUE(contains(message,
                       ":9:5: experiments[1]: experiment name 'seg' (branch main) is "
                       "already used by the experiment on line 7"))
      << message;
}

TEST(TreeExperiments, PrepareStepFromTheFileMustAgreeAcrossBranches) {
  TreeFixture tree;
  commit_files(tree.fixture.repo, "main",
               {{"configs/experiment/p.yaml", "model: mlp\nprepare: [./prepare.sh, a]\n"}});
  commit_files(tree.fixture.repo, "feature",
               {{"configs/experiment/p.yaml", "model: mlp\nprepare: [./prepare.sh, b]\n"}});
  const std::string message = matrix_error([&] { plan(tree.matrix("  - experiment: p\n")); });
  EXPECT_TRUE(contains(message,
                       "experiment 'p' has a different prepare step on main and on "
                       "feature"))
      << message;
  const ExpandedMatrix matrix = plan(tree.matrix("  - experiment: p\n    prepare: [./x.sh]\n"));
  ASSERT_FALSE(matrix.cells.empty());
  EXPECT_EQ(prepare_of(matrix, matrix.cells[0]).argv, std::vector<std::string>{"./x.sh"});
}

TEST(TreeExperiments, SchemaTreeEntryAllowsExactlyTheExperimentKeysAndExperiment) {
  const std::filesystem::path schemas = scalebench::build_info::source_dir() / "schemas";
  const auto read_json = [](const std::filesystem::path& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  };
  const auto matrix = read_json(schemas / "matrix.schema.json");
  const auto experiment = read_json(schemas / "experiment.schema.json");
  std::set<std::string> tree_keys;
  for (const auto& [key, value] : matrix["definitions"]["tree_experiment"]["properties"].items()) {
    tree_keys.insert(key);
    if (key != "experiment") {
      EXPECT_EQ(value["$ref"], "experiment.schema.json#/properties/" + key);
    }
  }
  std::set<std::string> expected{"experiment"};
  for (const auto& [key, value] : experiment["properties"].items()) expected.insert(key);
  EXPECT_EQ(tree_keys, expected);
}

TEST(ReadFileAtCommit, ReadsTheExactBytesOfEachCommit) {
  const TreeFixture tree;
  const auto& repo = tree.fixture.repo;
  const std::string main = resolve_ref(repo, "main");
  const std::string feature = resolve_ref(repo, "feature");
  EXPECT_EQ(read_file_at_commit(repo, main, "configs/experiment/seg.yaml", "main"), kMainSeg);
  EXPECT_EQ(read_file_at_commit(repo, feature, "configs/experiment/seg.yaml"), kFeatureSeg);
  // Read-only: the checkout of `repo` is untouched.
  EXPECT_EQ(git_in(repo, {"status", "--porcelain"}), "");
  EXPECT_EQ(git_in(repo, {"rev-parse", "--abbrev-ref", "HEAD"}), "main");
}

TEST(ReadFileAtCommit, RefusesMissingFilesDirectoriesAndBadPaths) {
  const TreeFixture tree;
  const auto& repo = tree.fixture.repo;
  const std::string main = resolve_ref(repo, "main");
  try {
    read_file_at_commit(repo, main, "configs/experiment/nope.yaml", "main", "m.yaml:3");
    FAIL() << "no exception";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_TRUE(contains(message,
                         "m.yaml:3: configs/experiment/nope.yaml does not exist in ref "
                         "main (commit " +
                             main + ") of repo "))
        << message;
    EXPECT_TRUE(contains(message, repo.string())) << message;
  }
  EXPECT_THROW(read_file_at_commit(repo, main, "configs/experiment"), InputError);
  for (const std::string path : {"../x", "/etc/passwd", "a//b", "a:b", "a b", "", "./a"}) {
    EXPECT_THROW(read_file_at_commit(repo, main, path), InputError) << path;
  }
  EXPECT_THROW(read_file_at_commit(repo, "main", "a.txt"), Error) << "not a full commit id";
  EXPECT_THROW(read_file_at_commit(tree.fixture.root.path() / "none", main, "a.txt"), InputError);
}

}  // namespace
}  // namespace scalebench
