// Rank 0's cell inputs: the tree a cell's paths resolve against, the TorchScript bytes it
// ships (with the one-entry cache), and the "inputs" failures for missing files.
#include "orchestrator/cell_inputs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/base/error.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;

TEST(ResolveInTree, KeepsAbsoluteJoinsRelativeAndNormalises) {
  EXPECT_EQ(resolve_in_tree("/trees/main", "/data/train.h5"), fs::path("/data/train.h5"));
  EXPECT_EQ(resolve_in_tree("/trees/main", "/data/./x/../train.h5"), fs::path("/data/train.h5"));
  EXPECT_EQ(resolve_in_tree("/trees/main", "models/net.pt"), fs::path("/trees/main/models/net.pt"));
  EXPECT_EQ(resolve_in_tree("/trees/main/", "./models/../data//train.h5"),
            fs::path("/trees/main/data/train.h5"));
  EXPECT_EQ(resolve_in_tree("/trees/main", "../shared/data.h5"), fs::path("/trees/shared/data.h5"));
}

class CellInputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("scalebench_cell_inputs_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "matrix");
    fs::create_directories(root_ / "wt-main");
    fs::create_directories(root_ / "wt-exp");
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write(const fs::path& path, const std::string& bytes) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }

  [[nodiscard]] CellInputs make_inputs() const {
    return CellInputs(root_ / "matrix",
                      {{"main", root_ / "wt-main"}, {"feature/exp", root_ / "wt-exp"}});
  }

  static CellSpec branch_cell(const std::string& branch) {
    CellSpec cell;
    cell.branch = branch;
    cell.commit = "0123456789abcdef0123456789abcdef01234567";
    cell.experiment = "own";
    cell.model.zoo = "mlp";
    cell.cell_id = "c1";
    return cell;
  }

  /// Runs attach and returns the CellError it must throw.
  static CellError attach_error(CellInputs& inputs, const CellSpec& cell) {
    Assignment assignment;
    try {
      inputs.attach(cell, assignment);
    } catch (const CellError& error) {
      return error;
    }
    ADD_FAILURE() << "expected CellError(inputs)";
    return CellError(FailurePhase::kNone, "");
  }

  fs::path root_;
};

void expect_contains(const std::string& text, const std::vector<std::string>& needles) {
  for (const auto& needle : needles) {
    EXPECT_NE(text.find(needle), std::string::npos) << "'" << needle << "' not in: " << text;
  }
}

TEST_F(CellInputsTest, SetsTheTreeOfABranchAndOfNoRepoCells) {
  CellInputs inputs = make_inputs();
  Assignment assignment;
  inputs.attach(branch_cell("feature/exp"), assignment);
  EXPECT_EQ(assignment.tree, (root_ / "wt-exp").string());
  EXPECT_TRUE(assignment.artifact.empty());  // a zoo model ships no bytes

  CellSpec no_repo = branch_cell("");
  no_repo.commit.clear();
  Assignment no_repo_assignment;
  inputs.attach(no_repo, no_repo_assignment);
  EXPECT_EQ(no_repo_assignment.tree, (root_ / "matrix").string());
  EXPECT_EQ(inputs.tree_of(no_repo), root_ / "matrix");
  EXPECT_EQ(inputs.tree_of(branch_cell("main")), root_ / "wt-main");
}

TEST_F(CellInputsTest, ACellOfTheCompileAxisShipsItsTwinsBytes) {
  CellInputs inputs = make_inputs();
  CellSpec twin = branch_cell("main");
  twin.compile = "torchscript";
  const CellError missing = attach_error(inputs, twin);
  EXPECT_EQ(missing.phase(), FailurePhase::kInputs);
  expect_contains(missing.what(), {"compile: torchscript", "exported no twin"});

  write(root_ / "work" / "compiled" / "k" / "model.ts", "traced");
  inputs.set_compiled_twins({{"c1", root_ / "work" / "compiled" / "k" / "model.ts"}});
  Assignment assignment;
  inputs.attach(twin, assignment);
  EXPECT_EQ(assignment.artifact, "traced");
  EXPECT_EQ(assignment.tree, (root_ / "wt-main").string());
}

TEST_F(CellInputsTest, ARelativeNoRepoTreeIsMadeAbsolute) {
  const CellInputs inputs("some/./relative/../dir", {});
  const fs::path tree = inputs.tree_of(CellSpec{});
  EXPECT_TRUE(tree.is_absolute()) << tree;
  EXPECT_EQ(tree, (fs::current_path() / "some/dir").lexically_normal());
}

TEST_F(CellInputsTest, UnknownBranchIsAnErrorNotACellFailure) {
  CellInputs inputs = make_inputs();
  Assignment assignment;
  try {
    inputs.attach(branch_cell("gone"), assignment);
    FAIL() << "expected Error";
  } catch (const CellError& error) {
    FAIL() << "a missing worktree is a bug, not a cell failure: " << error.what();
  } catch (const Error& error) {
    expect_contains(error.what(), {"gone", "c1"});
  }
}

TEST_F(CellInputsTest, ShipsTheTorchScriptBytesOfTheCellsTree) {
  const std::string bytes = std::string("PK\x03\x04", 4) + std::string("\0\x01\xff zip", 7);
  write(root_ / "wt-exp" / "models" / "net.pt", bytes);
  write(root_ / "wt-main" / "models" / "net.pt", "main's model");
  CellInputs inputs = make_inputs();
  CellSpec cell = branch_cell("feature/exp");
  cell.model = ModelSpec();
  cell.model.torchscript = "models/net.pt";
  Assignment assignment;
  inputs.attach(cell, assignment);
  EXPECT_EQ(assignment.artifact, bytes);
  EXPECT_EQ(assignment.tree, (root_ / "wt-exp").string());

  // Same relative path on another branch: that branch's file, not the cached one.
  cell.branch = "main";
  Assignment main_assignment;
  inputs.attach(cell, main_assignment);
  EXPECT_EQ(main_assignment.artifact, "main's model");
}

TEST_F(CellInputsTest, ARewrittenModelFileIsReadAgain) {
  const fs::path path = root_ / "wt-main" / "model.pt";
  write(path, "version one");
  CellInputs inputs = make_inputs();
  CellSpec cell = branch_cell("main");
  cell.model = ModelSpec();
  cell.model.torchscript = "model.pt";
  Assignment first;
  inputs.attach(cell, first);
  EXPECT_EQ(first.artifact, "version one");

  write(path, "version two, longer");
  Assignment second;
  inputs.attach(cell, second);
  EXPECT_EQ(second.artifact, "version two, longer");

  // Same size, newer mtime: read again too.
  write(path, "version three, long");
  fs::last_write_time(path, fs::last_write_time(path) + std::chrono::seconds(5));
  Assignment third;
  inputs.attach(cell, third);
  EXPECT_EQ(third.artifact, "version three, long");

  // Same size and mtime: the previous read is reused (documented cache behaviour).
  const auto mtime = fs::last_write_time(path);
  write(path, "VERSION THREE, LONG");
  fs::last_write_time(path, mtime);
  Assignment cached;
  inputs.attach(cell, cached);
  EXPECT_EQ(cached.artifact, "version three, long");
}

TEST_F(CellInputsTest, AMissingModelFailsTheCellNamingPathAndBranch) {
  CellInputs inputs = make_inputs();
  CellSpec cell = branch_cell("feature/exp");
  cell.model = ModelSpec();
  cell.model.torchscript = "models/missing.pt";
  const CellError error = attach_error(inputs, cell);
  EXPECT_EQ(to_string(error.phase()), "inputs");
  expect_contains(error.what(),
                  {"model.torchscript", "'models/missing.pt'", "branch feature/exp",
                   "commit 0123456789ab", (root_ / "wt-exp" / "models" / "missing.pt").string(),
                   "does not exist", "commit the file on feature/exp"});
}

TEST_F(CellInputsTest, AMissingDataFileOrCheckpointFailsTheCell) {
  CellInputs inputs = make_inputs();
  CellSpec cell = branch_cell("main");
  cell.data = {"hdf5", "data/train.h5", "x", "y"};
  CellError error = attach_error(inputs, cell);
  EXPECT_EQ(to_string(error.phase()), "inputs");
  expect_contains(error.what(), {"data.hdf5", "'data/train.h5'", "branch main",
                                 (root_ / "wt-main" / "data" / "train.h5").string()});

  write(root_ / "wt-main" / "data" / "train.h5", "h5");
  Assignment assignment;
  EXPECT_NO_THROW(inputs.attach(cell, assignment));

  cell.mode = Mode::kInfer;
  cell.checkpoint = "ckpt/weights.pt";
  error = attach_error(inputs, cell);
  EXPECT_EQ(to_string(error.phase()), "inputs");
  expect_contains(error.what(), {"checkpoint", "'ckpt/weights.pt'", "branch main",
                                 (root_ / "wt-main" / "ckpt" / "weights.pt").string()});

  // A directory is not a checkpoint file.
  fs::create_directories(root_ / "wt-main" / "ckpt" / "weights.pt");
  error = attach_error(inputs, cell);
  expect_contains(error.what(), {"is not a regular file"});
}

TEST_F(CellInputsTest, NoRepoCellsResolveAgainstTheMatrixFolder) {
  CellInputs inputs = make_inputs();
  CellSpec cell = branch_cell("");
  cell.commit.clear();
  cell.model = ModelSpec();
  cell.model.torchscript = "net.pt";
  const CellError error = attach_error(inputs, cell);
  EXPECT_EQ(to_string(error.phase()), "inputs");
  expect_contains(error.what(), {"the matrix file's folder", (root_ / "matrix" / "net.pt").string(),
                                 "relative to the matrix file's folder"});

  write(root_ / "matrix" / "net.pt", "bytes");
  Assignment assignment;
  inputs.attach(cell, assignment);
  EXPECT_EQ(assignment.artifact, "bytes");

  // An absolute path is used as written.
  const fs::path elsewhere = root_ / "elsewhere.pt";
  write(elsewhere, "absolute");
  cell.model.torchscript = elsewhere.string();
  inputs.attach(cell, assignment);
  EXPECT_EQ(assignment.artifact, "absolute");
}

}  // namespace
}  // namespace scalebench
