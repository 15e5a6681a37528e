// Note [Measured blocks]: the rules a cell's timing loop asks how many iterations to run next.
#include "common/cell/block_rules.h"

#include <gtest/gtest.h>

#include <vector>

namespace scalebench {
namespace {

/// Drives `rule` as the worker's loop does, every iteration taking `time_s`; returns the
/// block sizes it asked for (stops after 100 blocks, which no rule here needs).
std::vector<int64_t> blocks_asked(BlockRule& rule, double time_s) {
  std::vector<int64_t> blocks;
  double elapsed_s = 0.0;
  while (blocks.size() < 100) {
    const int64_t block = rule.next_block(elapsed_s);
    if (block <= 0) break;
    blocks.push_back(block);
    elapsed_s += time_s * static_cast<double>(block);
    if (!rule.needs_times()) {
      rule.add_block({}, 0.0);
      continue;
    }
    if (rule.add_block(std::vector<double>(static_cast<size_t>(block), time_s), elapsed_s)) break;
  }
  return blocks;
}

TEST(BlockRules, AFixedCountIsOneBlockWithoutTimes) {
  FixedBlocks rule(7);
  EXPECT_FALSE(rule.needs_times());
  EXPECT_EQ(blocks_asked(rule, 0.01), (std::vector<int64_t>{7}));
  EXPECT_EQ(rule.next_block(1.0), 0) << "a fixed count runs once";
  FixedBlocks none(0);
  EXPECT_TRUE(blocks_asked(none, 0.01).empty());
}

TEST(BlockRules, WarmupAutoEndsSteadyAfterTwoEqualWindows) {
  WarmupBlocks rule(60.0);
  EXPECT_TRUE(rule.needs_times());
  const auto blocks = blocks_asked(rule, 0.01);
  EXPECT_EQ(blocks, (std::vector<int64_t>{WarmupAuto::kWarmupWindow, WarmupAuto::kWarmupWindow}));
  EXPECT_EQ(rule.reason(), "steady");
}

TEST(BlockRules, AdaptiveStopsPreciseOnConstantTimes) {
  AdaptiveBlocks rule(AdaptiveOptions{0.02, 60.0, 2000});
  const auto blocks = blocks_asked(rule, 0.01);
  ASSERT_FALSE(blocks.empty());
  EXPECT_EQ(blocks.front(), AdaptiveStop::kMinMeasured);
  EXPECT_EQ(rule.decision(), StopReason::kPrecise);
  EXPECT_EQ(rule.next_block(1.0), 0) << "no block after a decision";
}

TEST(BlockRules, AdaptiveEndsAtItsCap) {
  AdaptiveBlocks rule(AdaptiveOptions{1e-9, 60.0, 3});
  const auto blocks = blocks_asked(rule, 0.01);
  EXPECT_EQ(blocks, (std::vector<int64_t>{3})) << "never a block past the cap";
  EXPECT_EQ(rule.decision(), StopReason::kCap);
  EXPECT_EQ(rule.next_block(0.03), 0);
}

TEST(BlockRules, AdaptiveEndsOnItsBudget) {
  // Times that never settle (alternating 1 and 2 s): only the budget can end the loop.
  AdaptiveBlocks rule(AdaptiveOptions{0.001, 30.0, 2000});
  double elapsed_s = 0.0;
  int blocks = 0;
  while (blocks < 100) {
    const int64_t block = rule.next_block(elapsed_s);
    ASSERT_GT(block, 0);
    std::vector<double> times;
    for (int64_t k = 0; k < block; ++k) times.push_back(k % 2 == 0 ? 1.0 : 2.0);
    for (const double t : times) elapsed_s += t;
    ++blocks;
    if (rule.add_block(times, elapsed_s)) break;
  }
  EXPECT_EQ(rule.decision(), StopReason::kBudget);
}

}  // namespace
}  // namespace scalebench
