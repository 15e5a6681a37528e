#include "common/cell/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <string>

namespace scalebench {
namespace {

std::vector<double> without_nan(const std::vector<double>& values) {
  std::vector<double> kept;
  kept.reserve(values.size());
  std::copy_if(values.begin(), values.end(), std::back_inserter(kept),
               [](double v) { return !std::isnan(v); });
  return kept;
}

/// numpy's "linear" method on an already sorted, NaN-free, non-empty vector.
double sorted_percentile(const std::vector<double>& sorted, double q) {
  const double position = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lower = static_cast<size_t>(std::floor(position));
  const size_t upper = std::min(lower + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(lower);
  return sorted[lower] + (sorted[upper] - sorted[lower]) * fraction;
}

}  // namespace

double percentile(std::vector<double> values, double q) {
  if (!(q >= 0.0 && q <= 100.0)) {
    throw std::invalid_argument("percentile: q must be in [0, 100], got " + std::to_string(q));
  }
  values = without_nan(values);
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  return sorted_percentile(values, q);
}

Summary summarize(const std::vector<double>& values) {
  std::vector<double> sorted = without_nan(values);
  Summary summary;
  summary.count = sorted.size();
  if (sorted.empty()) {
    summary.mean = summary.median = summary.std = summary.min = summary.max = kNaN;
    summary.p50 = summary.p90 = summary.p95 = summary.p99 = summary.cv = kNaN;
    return summary;
  }
  std::sort(sorted.begin(), sorted.end());
  const auto n = static_cast<double>(sorted.size());
  summary.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / n;
  if (sorted.size() > 1) {
    double squares = 0.0;
    for (const double v : sorted) squares += (v - summary.mean) * (v - summary.mean);
    summary.std = std::sqrt(squares / (n - 1.0));
    summary.cv = summary.std / summary.mean;
  } else {
    summary.std = kNaN;
    summary.cv = kNaN;
  }
  summary.min = sorted.front();
  summary.max = sorted.back();
  summary.median = sorted_percentile(sorted, 50.0);
  summary.p50 = summary.median;
  summary.p90 = sorted_percentile(sorted, 90.0);
  summary.p95 = sorted_percentile(sorted, 95.0);
  summary.p99 = sorted_percentile(sorted, 99.0);
  return summary;
}

std::string short_number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

}  // namespace scalebench
