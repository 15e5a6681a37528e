// How many iterations a cell measures when it chooses itself (`iterations: auto`,
// `warmup: auto`): pure rules over the group's per-iteration times, no clock, no MPI.
//
// Note [Iterations auto]
// ~~~~~~~~~~~~~~~~~~~~~~
// A fixed iteration count is either wasteful (a quiet machine reached a tight interval long
// ago) or too short (a busy one did not). With `iterations: auto` a cell measures in
// blocks and, after each block, asks whether the 95 % interval of its median iteration time
// is within +-ci_width of the median:
//   * the interval is the distribution-free one of the median (order statistics: the
//     ranks n/2 -+ 1.96 sqrt(n)/2 of the sorted samples, the normal approximation of the
//     binomial; Conover, Practical Nonparametric Statistics, 3.2), so skewed step times
//     (preemptions, allocator hiccups) are handled without assuming a distribution;
//   * its relative half-width is (high - low) / (2 median): half the interval's width, as
//     a "+-" is read (the larger side alone would be biased upwards by the noise of each
//     order statistic and need about 1.5 times the iterations for the same precision);
//   * the samples are the group's: per iteration the slowest rank's time (what the cell's
//     summary and the regression gate describe for training), so every rank sees the same
//     figures and decides alike;
//   * stop `precise` when the half-width is <= ci_width (after at least kMinMeasured
//     iterations), `budget` when the measured loop ran max_seconds (or the next block
//     would not fit in what is left of it), `cap` at max_iterations;
//   * blocks: the first is kMinMeasured; then the iterations the current width predicts
//     are still needed (the width shrinks as 1/sqrt(n): n (w/ci_width)^2 - n), at least
//     kMinBlock and at most a quarter of the iterations so far (an optimistic prediction
//     cannot overshoot by much), and never past the budget or the cap.
// The expected count for a known distribution is n = (1.96 / (2 f(m) m ci_width))^2 with
// f(m) the density at the median m; for a log-normal step time of log-sd s that is
// (1.96 s sqrt(2 pi) / (2 ci_width))^2, 151 iterations for s = 0.1 and ci_width = 0.02
// (170 with the integer ranks of a finite sample; tests/unit/common/adaptive_stop_test.cc
// checks the rule against that reference: 180 on average).
//
// Note [Warm-up auto]
// ~~~~~~~~~~~~~~~~~~~
// `warmup: auto` runs warm-up iterations in windows of kWarmupWindow and stops at the first
// window whose median is no more than kWarmupTolerance below the previous window's median:
// the cell stopped getting faster (warm-up only ever speeds up: allocator pools, cuDNN and
// autotuning caches, page faults, branch predictors). At least two windows are run (the
// first iteration, which initialises, is always among them), at most kWarmupCap iterations
// or a quarter of max_seconds. The iterations chosen are stored as the cell's warm-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace scalebench {

/// The 95 % distribution-free interval of the median of a sample set.
struct MedianInterval {
  size_t count = 0;  ///< samples (NaNs not counted)
  double median = 0.0;
  double low = 0.0;
  double high = 0.0;
  /// (high - low) / (2 median); +inf for fewer than 2 samples or a median <= 0.
  [[nodiscard]] double relative_half_width() const;
};

/// The interval of `values` (any order; NaNs ignored). Below 2 values: low = high =
/// median (NaN for none) and an infinite relative half-width.
MedianInterval median_interval(std::vector<double> values);

/// Why a cell's measured loop ended.
enum class StopReason {
  kFixed,    ///< `iterations: N`: ran its N
  kPrecise,  ///< auto: the interval reached +-ci_width
  kBudget,   ///< auto: max_seconds ran out first
  kCap,      ///< auto: max_iterations (or an inference shard's batches) ran out first
};
std::string to_string(StopReason reason);

struct AdaptiveOptions {
  double ci_width = 0.02;         ///< target relative half-width of the median's interval
  double max_seconds = 60.0;      ///< budget of the measured loop
  int64_t max_iterations = 2000;  ///< cap of measured iterations
};

/// The stopping rule of Note [Iterations auto]. Feed it every measured iteration's group time
/// in blocks of the size it asks for.
class AdaptiveStop {
 public:
  static constexpr int64_t kMinMeasured = 10;
  static constexpr int64_t kMinBlock = 5;

  explicit AdaptiveStop(AdaptiveOptions options);

  /// Iterations to run before the next `add_block`, given `elapsed_s` of the measured loop
  /// so far; >= 1 unless a decision was already made.
  [[nodiscard]] int64_t next_block(double elapsed_s) const;
  /// Adds the group times of the block just run and decides; std::nullopt: go on.
  std::optional<StopReason> add_block(const std::vector<double>& group_times_s, double elapsed_s);

  [[nodiscard]] int64_t measured() const { return static_cast<int64_t>(times_.size()); }
  [[nodiscard]] MedianInterval interval() const { return median_interval(times_); }

 private:
  AdaptiveOptions options_;
  std::vector<double> times_;
  double relative_width_ = 0.0;  ///< after the last block
};

/// The warm-up rule of Note [Warm-up auto].
class WarmupAuto {
 public:
  static constexpr int64_t kWarmupWindow = 5;
  static constexpr double kWarmupTolerance = 0.05;
  static constexpr int64_t kWarmupCap = 50;

  /// `max_seconds`: the cell's budget; warm-up stops after a quarter of it.
  explicit WarmupAuto(double max_seconds) : max_seconds_(max_seconds) {}

  /// Iterations in the next window (never past the cap).
  [[nodiscard]] int64_t next_window() const;
  /// Adds a window's group times; true when warm-up is over (steady, or the cap / time).
  bool add_window(const std::vector<double>& group_times_s, double elapsed_s);
  [[nodiscard]] int64_t iterations() const { return iterations_; }
  /// Why it ended: "steady", "cap" or "time"; "" while running.
  [[nodiscard]] const std::string& reason() const { return reason_; }

 private:
  double max_seconds_;
  int64_t iterations_ = 0;
  std::optional<double> previous_median_;
  std::string reason_;
};

}  // namespace scalebench
