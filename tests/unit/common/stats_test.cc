// Table-driven tests of common/cell/stats against values computed with numpy
// (np.mean, np.median, np.std(ddof=1), np.percentile default "linear" method).
#include "common/cell/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace scalebench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct SummaryCase {
  std::string name;
  std::vector<double> values;
  Summary expected;  // count, mean, median, std, min, max, p50, p90, p95, p99, cv
};

const std::vector<SummaryCase>& summary_cases() {
  static const std::vector<SummaryCase> cases = {
      {"single", {0.5}, {1, 0.5, 0.5, kNaN, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, kNaN}},
      {"two",
       {1.0, 3.0},
       {2, 2.0, 2.0, 1.4142135623730951, 1.0, 3.0, 2.0, 2.8, 2.9, 2.98, 0.7071067811865476}},
      {"ints",
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
       {10, 5.5, 5.5, 3.0276503540974917, 1.0, 10.0, 5.5, 9.1, 9.549999999999999, 9.91,
        0.5504818825631803}},
      {"unsorted",
       {0.031, 0.029, 0.035, 0.030, 0.041, 0.028, 0.033},
       {7, 0.03242857142857143, 0.031, 0.004466808810815722, 0.028, 0.041, 0.031, 0.0374, 0.0392,
        0.040639999999999996, 0.13774300297669625}},
      {"ties",
       {2.0, 2.0, 2.0, 5.0},
       {4, 2.75, 2.0, 1.5, 2.0, 5.0, 2.0, 4.1000000000000005, 4.549999999999999, 4.909999999999999,
        0.5454545454545454}},
      {"spread",
       {1e-3, 2.5e-3, 7e-4, 1.2e-2, 3.3e-3, 9.9e-4, 4.1e-3, 2.2e-3, 5.5e-3, 1.1e-3, 6.0e-4},
       {11, 0.00309, 0.0022, 0.0033474019776537148, 0.0006, 0.012, 0.0022, 0.0055, 0.00875,
        0.011350000000000002, 1.08330161089117}},
      // NaN padding is dropped: same numbers as "two".
      {"nan_ignored",
       {kNaN, 1.0, kNaN, 3.0},
       {2, 2.0, 2.0, 1.4142135623730951, 1.0, 3.0, 2.0, 2.8, 2.9, 2.98, 0.7071067811865476}},
      {"empty", {}, {0, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN}},
      {"all_nan", {kNaN, kNaN}, {0, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN}},
  };
  return cases;
}

void expect_near_or_nan(double expected, double actual, const std::string& what) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(actual)) << what << " = " << actual << ", expected NaN";
  } else {
    EXPECT_NEAR(expected, actual, 1e-12 * std::max(1.0, std::fabs(expected))) << what;
  }
}

TEST(Summarize, MatchesNumpy) {
  for (const auto& c : summary_cases()) {
    SCOPED_TRACE(c.name);
    const Summary s = summarize(c.values);
    EXPECT_EQ(c.expected.count, s.count);
    expect_near_or_nan(c.expected.mean, s.mean, "mean");
    expect_near_or_nan(c.expected.median, s.median, "median");
    expect_near_or_nan(c.expected.std, s.std, "std");
    expect_near_or_nan(c.expected.min, s.min, "min");
    expect_near_or_nan(c.expected.max, s.max, "max");
    expect_near_or_nan(c.expected.p50, s.p50, "p50");
    expect_near_or_nan(c.expected.p90, s.p90, "p90");
    expect_near_or_nan(c.expected.p95, s.p95, "p95");
    expect_near_or_nan(c.expected.p99, s.p99, "p99");
    expect_near_or_nan(c.expected.cv, s.cv, "cv");
  }
}

TEST(Percentile, MatchesNumpyLinear) {
  const std::vector<double> values = {0.031, 0.029, 0.035, 0.030, 0.041, 0.028, 0.033};
  const std::vector<std::pair<double, double>> table = {
      {0.0, 0.028}, {12.5, 0.02875}, {33.3, 0.029998}, {66.7, 0.033004000000000006}, {100.0, 0.041},
  };
  for (const auto& [q, expected] : table) {
    SCOPED_TRACE(q);
    EXPECT_NEAR(expected, percentile(values, q), 1e-15);
  }
}

TEST(Percentile, EmptyIsNaN) { EXPECT_TRUE(std::isnan(percentile({}, 50.0))); }

TEST(Percentile, RejectsOutOfRangeQ) {
  EXPECT_THROW(percentile({1.0}, -0.1), std::invalid_argument);
  EXPECT_THROW(percentile({1.0}, 100.5), std::invalid_argument);
  EXPECT_THROW(percentile({1.0}, kNaN), std::invalid_argument);
}

}  // namespace
}  // namespace scalebench
