// Note [Repetitions]: the order of interleaved repetitions is a seeded shuffle; every other
// cell keeps its place.
#include "orchestrator/dispatch_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/matrix/matrix.h"

namespace scalebench {
namespace {

std::vector<std::string> ids(const std::vector<CellSpec>& cells) {
  std::vector<std::string> out;
  for (const auto& c : cells) out.push_back(c.cell_id);
  return out;
}

std::vector<CellSpec> repeated_cells(int repetitions, const std::string& extra = "") {
  return load_matrix_text("m.yaml", "sweep:\n  batch_sizes: [2, 4, 8]\ndefaults: {repetitions: " +
                                        std::to_string(repetitions) +
                                        "}\nexperiments:\n  - name: a\n    model: mlp\n" + extra)
      .cells;
}

TEST(DispatchOrder, IsASeededPermutationOfTheCells) {
  const auto cells = repeated_cells(5);
  ASSERT_EQ(cells.size(), 15U);
  const auto order = ids(dispatch_order(cells, 42));
  EXPECT_EQ(order, ids(dispatch_order(cells, 42)));  // the same seed, the same order
  EXPECT_NE(order, ids(dispatch_order(cells, 43)));
  EXPECT_NE(order, ids(cells));  // shuffled: 15! orders, identity has probability ~1e-12
  auto sorted = order;
  auto expected = ids(cells);
  std::sort(sorted.begin(), sorted.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(sorted, expected);  // every cell once
}

TEST(DispatchOrder, RepetitionsOfOneCellAreSpreadOverTheRun) {
  // Over many seeds, the repetitions of one series are not run back to back: the mean
  // position of each series is near the middle and consecutive runs of one series are rare.
  const auto cells = repeated_cells(5);
  size_t back_to_back = 0;
  size_t pairs = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const auto order = dispatch_order(cells, seed);
    for (size_t i = 1; i < order.size(); ++i) {
      ++pairs;
      if (series_id(order[i]) == series_id(order[i - 1])) ++back_to_back;
    }
  }
  // A uniform shuffle of 3 series x 5 gives P(same neighbour) = 4/14 = 0.286; matrix order
  // would give 12/14 = 0.857.
  const double share = static_cast<double>(back_to_back) / static_cast<double>(pairs);
  EXPECT_NEAR(share, 4.0 / 14.0, 0.05);
}

TEST(DispatchOrder, CellsThatAreNotInterleavedKeepTheirPlaces) {
  // Experiment b repeats without interleave; experiment c is not repeated: both stay in
  // matrix order at their positions, a's repetitions are shuffled among a's positions.
  const auto cells = load_matrix_text("m.yaml",
                                      "sweep:\n  batch_sizes: [2, 4]\nexperiments:\n"
                                      "  - name: a\n    model: mlp\n    repetitions: 4\n"
                                      "  - name: b\n    model: mlp\n    repetitions: 2\n"
                                      "    interleave: false\n"
                                      "  - name: c\n    model: mlp\n")
                         .cells;
  ASSERT_EQ(cells.size(), 8U + 4U + 2U);
  const auto order = dispatch_order(cells, 7);
  bool a_moved = false;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (cells[i].experiment == "a") {
      EXPECT_EQ(order[i].experiment, "a");
      a_moved = a_moved || order[i].cell_id != cells[i].cell_id;
    } else {
      EXPECT_EQ(order[i].cell_id, cells[i].cell_id) << i;
    }
  }
  EXPECT_TRUE(a_moved);
}

TEST(DispatchOrder, AMatrixWithoutRepetitionsRunsInMatrixOrder) {
  const auto cells = repeated_cells(1);
  EXPECT_EQ(ids(dispatch_order(cells, 99)), ids(cells));
}

TEST(DispatchOrder, DefaultSeedFollowsTheMatrix) {
  EXPECT_EQ(default_order_seed("0123456789abcdef"), default_order_seed("0123456789abcdef"));
  EXPECT_NE(default_order_seed("0123456789abcdef"), default_order_seed("0123456789abcdee"));
}

}  // namespace
}  // namespace scalebench
