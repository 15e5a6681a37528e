// Note [Repetitions]: interleaved repetitions run in rounds (repetition k of every
// interleaved cell in round k, shuffled within the round); every other cell keeps its place.
#include "orchestrator/dispatch_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "matrix/matrix.h"

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

TEST(DispatchOrder, EachRoundEndsBeforeTheNextStarts) {
  // Repetition k of every series runs before repetition k + 1 of any: the order is
  // 3 cells of round 0, then 3 of round 1, ..., each round holding each series once.
  const auto cells = repeated_cells(5);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const auto order = dispatch_order(cells, seed);
    ASSERT_EQ(order.size(), 15U);
    for (size_t i = 0; i < order.size(); ++i) {
      EXPECT_EQ(order[i].repetition, static_cast<int64_t>(i / 3)) << "seed " << seed << " at " << i;
    }
    for (size_t round = 0; round < 5; ++round) {
      std::vector<std::string> series;
      for (size_t i = 3 * round; i < 3 * round + 3; ++i) series.push_back(series_id(order[i]));
      std::sort(series.begin(), series.end());
      EXPECT_EQ(std::unique(series.begin(), series.end()), series.end()) << "seed " << seed;
    }
  }
}

TEST(DispatchOrder, TheOrderWithinARoundIsShuffled) {
  // Over many seeds each series comes first in round 0 about a third of the time (a fixed
  // order within the rounds would put the same series first every time, and the same side
  // of a comparison first in every pair).
  const auto cells = repeated_cells(5);
  std::map<std::string, int> first;
  for (uint64_t seed = 0; seed < 300; ++seed) ++first[series_id(dispatch_order(cells, seed)[0])];
  ASSERT_EQ(first.size(), 3U);
  for (const auto& [series, count] : first) EXPECT_NEAR(count, 100, 30) << series;
}

TEST(DispatchOrder, CellsWithFewerRepetitionsLeaveTheLaterRounds) {
  // a has 3 repetitions, b 2 (both interleaved): rounds 0 and 1 hold both, round 2 only a.
  const auto cells = load_matrix_text("m.yaml",
                                      "sweep:\n  batch_sizes: [2]\nexperiments:\n"
                                      "  - name: a\n    model: mlp\n    repetitions: 3\n"
                                      "  - name: b\n    model: mlp\n    repetitions: 2\n")
                         .cells;
  ASSERT_EQ(cells.size(), 5U);
  const auto order = dispatch_order(cells, 3);
  std::vector<int64_t> rounds;
  for (const auto& cell : order) rounds.push_back(cell.repetition);
  EXPECT_EQ(rounds, (std::vector<int64_t>{0, 0, 1, 1, 2}));
  EXPECT_EQ(order.back().experiment, "a");
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
