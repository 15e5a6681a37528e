// Note [Accuracy across cells]: which cell is a validating program cell's baseline.
#include "orchestrator/cross_cell_accuracy.h"

#include <gtest/gtest.h>

#include <vector>

namespace scalebench {
namespace {

CellSpec program_cell(const std::string& branch, Precision precision, int64_t repetition = 0) {
  CellSpec cell;
  cell.branch = branch;
  cell.commit = branch == "main" ? "aaaa" : "bbbb";
  cell.experiment = "train";
  cell.program.command = {"python", "train.py"};
  cell.precision = precision;
  cell.validate = true;
  cell.repetition = repetition;
  cell.source = "m.yaml:" + branch;
  return finalize_cell_id(cell);
}

TEST(CrossCellAccuracy, TheBaselineBranchsCellDiffersOnlyInBranchAndCommit) {
  const std::vector<CellSpec> cells = {
      program_cell("main", Precision::kFp32), program_cell("main", Precision::kBf16),
      program_cell("fast", Precision::kFp32), program_cell("fast", Precision::kBf16)};
  const BaselineSpec by_branch{"main", {}};
  const auto base = baseline_cell(cells[3], cells, by_branch);
  ASSERT_TRUE(base.has_value());
  EXPECT_EQ(base->cell_id, cells[1].cell_id) << "fast bf16 against main bf16";
  EXPECT_EQ(baseline_cell(cells[2], cells, by_branch)->cell_id, cells[0].cell_id);
  EXPECT_FALSE(baseline_cell(cells[1], cells, by_branch)) << "the baseline itself";
  EXPECT_EQ(baseline_description(*base, by_branch),
            "cell " + cells[1].cell_id + ": branch main, same settings");
}

TEST(CrossCellAccuracy, TheReferenceIsTheSameBranchInFp32WithoutSwitches) {
  std::vector<CellSpec> cells = {program_cell("fast", Precision::kFp32),
                                 program_cell("fast", Precision::kBf16)};
  CellSpec channels_last = program_cell("fast", Precision::kFp32);
  channels_last.channels_last = true;
  channels_last.tolerance = 0.05;  // the validation settings may differ
  cells.push_back(finalize_cell_id(channels_last));
  const BaselineSpec reference;
  EXPECT_EQ(baseline_cell(cells[1], cells, reference)->cell_id, cells[0].cell_id);
  EXPECT_EQ(baseline_cell(cells[2], cells, reference)->cell_id, cells[0].cell_id);
  EXPECT_FALSE(baseline_cell(cells[0], cells, reference));
  EXPECT_FALSE(baseline_cell(cells[1], {cells[1]}, reference)) << "not in the matrix";
}

TEST(CrossCellAccuracy, RepetitionsMeetTheirOwnRepetitionElseTheFirst) {
  const std::vector<CellSpec> cells = {
      program_cell("main", Precision::kFp32, 0), program_cell("main", Precision::kFp32, 1),
      program_cell("fast", Precision::kFp32, 0), program_cell("fast", Precision::kFp32, 1),
      program_cell("fast", Precision::kFp32, 2)};
  const BaselineSpec by_branch{"main", {}};
  EXPECT_EQ(baseline_cell(cells[3], cells, by_branch)->cell_id, cells[1].cell_id);
  EXPECT_EQ(baseline_cell(cells[4], cells, by_branch)->cell_id, cells[0].cell_id);
}

TEST(CrossCellAccuracy, ValidatingProgramCellsAndTorchScriptInferenceWithABranchAreCompared) {
  const BaselineSpec reference;
  const BaselineSpec by_branch{"main", {}};
  CellSpec cell = program_cell("main", Precision::kFp32);
  EXPECT_TRUE(compared_across_cells(cell, reference));
  cell.validate = false;
  EXPECT_FALSE(compared_across_cells(cell, by_branch));
  CellSpec zoo;
  zoo.model.zoo = "mlp";
  zoo.validate = true;
  zoo.mode = Mode::kInfer;
  EXPECT_FALSE(compared_across_cells(zoo, by_branch)) << "the same built-in model everywhere";
  CellSpec own;
  own.model.torchscript = "build/model.pt";
  own.validate = true;
  own.mode = Mode::kInfer;
  EXPECT_TRUE(compared_across_cells(own, by_branch));
  EXPECT_FALSE(compared_across_cells(own, reference)) << "compared inside its cell";
  own.mode = Mode::kTrain;
  EXPECT_FALSE(compared_across_cells(own, by_branch)) << "training hands no outputs";
}

}  // namespace
}  // namespace scalebench
