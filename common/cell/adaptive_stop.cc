#include "common/cell/adaptive_stop.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace scalebench {
namespace {

constexpr double kZ95 = 1.959963984540054;  // two-sided 95 % normal quantile
constexpr double kInf = std::numeric_limits<double>::infinity();

double median_of_sorted(const std::vector<double>& sorted) {
  const size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

}  // namespace

double MedianInterval::relative_half_width() const {
  if (count < 2 || !(median > 0.0)) return kInf;
  return (high - low) / (2.0 * median);
}

MedianInterval median_interval(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }),
               values.end());
  std::sort(values.begin(), values.end());
  MedianInterval interval;
  const size_t n = values.size();
  interval.count = n;
  if (n == 0) {
    interval.median = interval.low = interval.high = std::numeric_limits<double>::quiet_NaN();
    return interval;
  }
  interval.median = median_of_sorted(values);
  if (n < 2) {
    interval.low = interval.high = interval.median;
    return interval;
  }
  // 1-based ranks of the order statistics bounding the median (Note [Iterations auto]).
  const double half = static_cast<double>(n) / 2.0;
  const double spread = kZ95 * std::sqrt(static_cast<double>(n)) / 2.0;
  const auto lower = static_cast<size_t>(std::max(1.0, std::floor(half - spread)));
  const auto upper =
      static_cast<size_t>(std::min(static_cast<double>(n), std::ceil(1.0 + half + spread)));
  interval.low = values[lower - 1];
  interval.high = values[upper - 1];
  return interval;
}

std::string to_string(StopReason reason) {
  switch (reason) {
    case StopReason::kFixed:
      return "fixed";
    case StopReason::kPrecise:
      return "precise";
    case StopReason::kBudget:
      return "budget";
    case StopReason::kCap:
      return "cap";
  }
  return "fixed";
}

AdaptiveStop::AdaptiveStop(AdaptiveOptions options) : options_(options) {}

int64_t AdaptiveStop::next_block(double elapsed_s) const {
  const int64_t n = measured();
  const int64_t left = options_.max_iterations - n;
  if (left <= 0) return 0;
  int64_t block = kMinMeasured;
  if (n >= kMinMeasured) {
    // The width shrinks as 1/sqrt(n): n (w / ci_width)^2 iterations reach the target.
    const double ratio = relative_width_ / options_.ci_width;
    const double predicted =
        std::isfinite(ratio) ? static_cast<double>(n) * (ratio * ratio - 1.0) : kInf;
    const double capped = std::min(predicted, static_cast<double>(std::max(kMinBlock, n / 4)));
    block = std::max(kMinBlock, static_cast<int64_t>(std::ceil(capped)));
    // Never plan past the budget: at the mean time per iteration so far.
    if (elapsed_s > 0.0) {
      const double per_iteration = elapsed_s / static_cast<double>(n);
      const double fits = (options_.max_seconds - elapsed_s) / per_iteration;
      block = std::min<int64_t>(block, std::max<int64_t>(1, static_cast<int64_t>(fits)));
    }
  }
  return std::min(block, left);
}

std::optional<StopReason> AdaptiveStop::add_block(const std::vector<double>& group_times_s,
                                                  double elapsed_s) {
  times_.insert(times_.end(), group_times_s.begin(), group_times_s.end());
  relative_width_ = interval().relative_half_width();
  const int64_t n = measured();
  if (n >= kMinMeasured && relative_width_ <= options_.ci_width) return StopReason::kPrecise;
  if (n >= options_.max_iterations) return StopReason::kCap;
  if (elapsed_s >= options_.max_seconds) return StopReason::kBudget;
  // The next block would not fit: one iteration takes longer than what is left.
  if (n > 0 && elapsed_s + elapsed_s / static_cast<double>(n) > options_.max_seconds) {
    return StopReason::kBudget;
  }
  return std::nullopt;
}

int64_t WarmupAuto::next_window() const {
  return std::min(kWarmupWindow, kWarmupCap - iterations_);
}

bool WarmupAuto::add_window(const std::vector<double>& group_times_s, double elapsed_s) {
  iterations_ += static_cast<int64_t>(group_times_s.size());
  const double median = median_interval(group_times_s).median;
  const bool steady = previous_median_ && median >= *previous_median_ * (1.0 - kWarmupTolerance);
  previous_median_ = median;
  if (steady) {
    reason_ = "steady";
  } else if (iterations_ >= kWarmupCap) {
    reason_ = "cap";
  } else if (elapsed_s >= max_seconds_ / 4.0) {
    reason_ = "time";
  }
  return !reason_.empty();
}

}  // namespace scalebench
