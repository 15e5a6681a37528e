// Descriptive statistics of timing samples: pure functions, table-driven tested against
// numpy (tests/unit/common/stats_test.cc).
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace scalebench {

/// The value of a statistic that is undefined for its sample (and of a missing figure).
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// `value` with 4 significant digits ("%.4g": 0.0123, 1.5e+04, nan), as messages quote a
/// statistic.
std::string short_number_text(double value);

/// Statistics of one sample set. Times in whatever unit the values have (seconds in
/// scalebench). `std` is the sample standard deviation (n-1 denominator, numpy ddof=1);
/// `cv` = std / mean. `p50` equals `median` (both kept: the results layout stores both).
/// Fields that are undefined for the sample size are NaN: everything but `count` for an
/// empty set, `std` and `cv` for a single value.
struct Summary {
  size_t count = 0;
  double mean = 0.0;
  double median = 0.0;
  double std = 0.0;
  double min = 0.0;
  double max = 0.0;
  double p50 = 0.0;
  double p90 = 0.0;
  double p95 = 0.0;
  double p99 = 0.0;
  double cv = 0.0;
};

/// The q-th percentile (q in [0, 100]) with linear interpolation between closest ranks,
/// i.e. numpy.percentile's default method. NaN for an empty vector. NaN entries are
/// ignored. Throws std::invalid_argument when q is outside [0, 100] or NaN.
double percentile(std::vector<double> values, double q);

/// count, mean, median, std (n-1), min, max, p50/p90/p95/p99 and cv of `values`. NaN
/// entries (padding of ragged timing tables) are ignored and not counted.
Summary summarize(const std::vector<double>& values);

}  // namespace scalebench
