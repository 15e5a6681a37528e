// Note [Measured blocks]
// ~~~~~~~~~~~~~~~~~~~~~~
// A cell's warm-up and its measured iterations are each one loop of blocks (the worker's
// run_timed_loop, worker/timed_loop.cc): it runs the block of iterations a rule asks for,
// hands the rule the group's times of that block, and asks again, like google/benchmark's
// runner asks how many iterations to run next. The rules decide, the loop only runs:
//  * FixedBlocks: `warmup: N` / `iterations: N`, one block of N, no times needed (so no
//    collective: the ranks of an independent inference cell may run different counts);
//  * WarmupBlocks: `warmup: auto` (Note [Warm-up auto]), windows until steady;
//  * AdaptiveBlocks: `iterations: auto` (Note [Iterations auto]), blocks until the interval
//    of the median is narrow enough, the budget ran out or the cap was reached.
// The time limit is not a rule: the loop checks it between iterations (Note [Cooperative
// timeout]) whatever rule runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/cell/adaptive_stop.h"

namespace scalebench {

/// How many iterations a loop runs next and when it is done. Not thread safe.
class BlockRule {
 public:
  virtual ~BlockRule() = default;
  /// Iterations of the next block (>= 1), or 0 when the loop is done before it;
  /// `elapsed_s`: the group's agreed seconds of this loop as of the last block (0 before it).
  [[nodiscard]] virtual int64_t next_block(double elapsed_s) const = 0;
  /// Whether the rule needs the group's times after each block (a collective over the group:
  /// every rank then runs the same blocks).
  [[nodiscard]] virtual bool needs_times() const = 0;
  /// The group's times of the block just run (slowest rank per row) and the loop's agreed
  /// elapsed seconds; true when the loop is done. Called only when needs_times().
  virtual bool add_block(const std::vector<double>& group_times_s, double elapsed_s) = 0;
};

/// A fixed count: one block of `count` (none for 0).
class FixedBlocks : public BlockRule {
 public:
  explicit FixedBlocks(int64_t count) : count_(count) {}
  [[nodiscard]] int64_t next_block(double elapsed_s) const override;
  [[nodiscard]] bool needs_times() const override { return false; }
  bool add_block(const std::vector<double>& group_times_s, double elapsed_s) override;

 private:
  int64_t count_;
  bool ran_ = false;
};

/// `warmup: auto` (Note [Warm-up auto]): WarmupAuto's windows.
class WarmupBlocks : public BlockRule {
 public:
  explicit WarmupBlocks(double max_seconds) : rule_(max_seconds) {}
  [[nodiscard]] int64_t next_block(double elapsed_s) const override;
  [[nodiscard]] bool needs_times() const override { return true; }
  bool add_block(const std::vector<double>& group_times_s, double elapsed_s) override;
  /// Why warm-up ended: "steady", "cap" or "time"; "" while running.
  [[nodiscard]] const std::string& reason() const { return rule_.reason(); }

 private:
  WarmupAuto rule_;
};

/// `iterations: auto` (Note [Iterations auto]): AdaptiveStop's blocks.
class AdaptiveBlocks : public BlockRule {
 public:
  explicit AdaptiveBlocks(const AdaptiveOptions& options) : rule_(options) {}
  [[nodiscard]] int64_t next_block(double elapsed_s) const override;
  [[nodiscard]] bool needs_times() const override { return true; }
  bool add_block(const std::vector<double>& group_times_s, double elapsed_s) override;
  /// The rule's decision (precise, budget), nullopt while none: a loop that the rule ended
  /// without one ended at the cap (no further block to ask for).
  [[nodiscard]] const std::optional<StopReason>& decision() const { return decision_; }
  [[nodiscard]] int64_t measured() const { return rule_.measured(); }
  [[nodiscard]] MedianInterval interval() const { return rule_.interval(); }

 private:
  AdaptiveStop rule_;
  std::optional<StopReason> decision_;
};

}  // namespace scalebench
