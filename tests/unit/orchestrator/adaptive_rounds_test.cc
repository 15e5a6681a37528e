// Note [Adaptive repetitions]: the first three rounds run at once, a later round waits for
// every earlier adaptive run and a look, and runs only for the series the look left undecided;
// the rest are retired with their reason.
#include "orchestrator/adaptive_rounds.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace scalebench {
namespace {

/// Two adaptive series of 5 runs (a, b) and one plain cell, in round order.
std::vector<CellSpec> cells() {
  std::vector<CellSpec> out;
  for (int64_t k = 0; k < 5; ++k) {
    for (const std::string name : {"a", "b"}) {
      CellSpec cell;
      cell.experiment = name;
      cell.repetitions = 5;
      cell.repetition = k;
      cell.adaptive_repetitions = true;
      out.push_back(finalize_cell_id(cell));
    }
  }
  CellSpec plain;
  plain.experiment = "plain";
  out.push_back(finalize_cell_id(plain));
  return out;
}

TEST(AdaptiveRounds, TheFirstThreeRoundsAndPlainCellsRunAtOnce) {
  const auto all = cells();
  AdaptiveRounds rounds(all);
  EXPECT_EQ(rounds.initial(), (std::vector<size_t>{0, 1, 2, 3, 4, 5, 10}));
  EXPECT_TRUE(rounds.holding());
  EXPECT_EQ(rounds.round_ready(), -1) << "round 0..2 are still out";
  for (const size_t i : {0, 1, 2, 3, 4}) rounds.finished(i);
  EXPECT_EQ(rounds.round_ready(), -1) << "one run of round 2 is still out";
  rounds.finished(5);
  EXPECT_EQ(rounds.round_ready(), 3);
}

TEST(AdaptiveRounds, ALookReleasesTheRoundForUndecidedSeriesAndRetiresTheRest) {
  const auto all = cells();
  AdaptiveRounds rounds(all);
  for (const size_t i : rounds.initial()) rounds.finished(i);
  AdaptiveLook look;
  look.undecided = {series_id(all[1])};  // b undecided, a decided
  std::vector<size_t> retired;
  const auto released = rounds.release(3, look, false, retired);
  EXPECT_EQ(released, (std::vector<size_t>{7}));    // b's round 3
  EXPECT_EQ(retired, (std::vector<size_t>{6, 8}));  // a's rounds 3 and 4
  EXPECT_NE(rounds.reason_of(6).find("decided after 3 runs"), std::string::npos);
  EXPECT_EQ(rounds.round_ready(), -1) << "b's round 3 is running";
  rounds.finished(7);
  EXPECT_EQ(rounds.round_ready(), 4);
  const auto last = rounds.release(4, look, /*out_of_budget=*/true, retired);
  EXPECT_TRUE(last.empty());
  EXPECT_EQ(retired, (std::vector<size_t>{9}));
  EXPECT_NE(rounds.reason_of(9).find("repetitions_budget_s"), std::string::npos);
  EXPECT_FALSE(rounds.holding());
}

TEST(AdaptiveRounds, WithoutAdaptiveCellsNothingIsHeld) {
  std::vector<CellSpec> plain(3);
  for (size_t i = 0; i < plain.size(); ++i) {
    plain[i].experiment = "e" + std::to_string(i);
    plain[i] = finalize_cell_id(plain[i]);
  }
  AdaptiveRounds rounds(plain);
  EXPECT_EQ(rounds.initial(), (std::vector<size_t>{0, 1, 2}));
  EXPECT_FALSE(rounds.holding());
  EXPECT_EQ(rounds.round_ready(), -1);
}

}  // namespace
}  // namespace scalebench
