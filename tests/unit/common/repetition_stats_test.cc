// Note [Repetitions]: the bootstrap interval against an exact bootstrap distribution, the
// series figures against hand-computed values, the matrix expansion of repetitions.
#include "common/cell/repetition_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/cell/cell_spec.h"
#include "common/cell/stats.h"
#include "matrix/matrix.h"
#include "results/overview.h"

namespace scalebench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(Splitmix64, MatchesTheReferenceSequence) {
  // The first outputs of splitmix64 from seed 0 (Vigna's reference implementation).
  uint64_t state = 0;
  EXPECT_EQ(splitmix64_next(state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(splitmix64_next(state), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(splitmix64_next(state), 0x06c45d188009454fULL);
}

/// The exact bootstrap distribution of the median of `values`: every one of the n^n
/// resamples (equally likely), its median. n must be small.
std::vector<double> exact_bootstrap_medians(const std::vector<double>& values) {
  const size_t n = values.size();
  size_t total = 1;
  for (size_t i = 0; i < n; ++i) total *= n;
  std::vector<double> medians;
  medians.reserve(total);
  std::vector<double> sample(n);
  for (size_t code = 0; code < total; ++code) {
    size_t rest = code;
    for (size_t i = 0; i < n; ++i) {
      sample[i] = values[rest % n];
      rest /= n;
    }
    medians.push_back(percentile(sample, 50.0));
  }
  return medians;
}

TEST(BootstrapMedianInterval, AgreesWithTheExactBootstrapDistribution) {
  // 10^4 resamples estimate the 2.5 % and 97.5 % points of the exact distribution; with
  // these values the bootstrap medians take few distinct values, so the estimate must be
  // the exact percentile or its neighbour value in the distribution.
  const std::vector<std::vector<double>> cases = {
      {1.0, 2.0, 3.0, 4.0, 5.0}, {0.031, 0.029, 0.035, 0.030, 0.041, 0.028}, {10, 10.5, 30}};
  for (const auto& values : cases) {
    const auto exact = exact_bootstrap_medians(values);
    const double exact_low = percentile(exact, 2.5);
    const double exact_high = percentile(exact, 97.5);
    const Interval found = bootstrap_median_interval(values, 0.95, 10000, 12345);
    std::vector<double> distinct = exact;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    // The width of the widest gap next to the exact bound: the Monte Carlo bound may land
    // anywhere between the neighbouring support points.
    auto neighbourhood = [&distinct](double bound) {
      const auto above = std::upper_bound(distinct.begin(), distinct.end(), bound);
      const double next = above == distinct.end() ? distinct.back() : *above;
      const double previous = above == distinct.begin() ? distinct.front() : *(above - 1);
      return std::max(next - bound, bound - previous) + 1e-12;
    };
    EXPECT_NEAR(found.low, exact_low, neighbourhood(exact_low)) << values.size();
    EXPECT_NEAR(found.high, exact_high, neighbourhood(exact_high)) << values.size();
    const auto [min, max] = std::minmax_element(values.begin(), values.end());
    EXPECT_GE(found.low, *min);
    EXPECT_LE(found.high, *max);
    EXPECT_LE(found.low, percentile(values, 50.0));
    EXPECT_GE(found.high, percentile(values, 50.0));
  }
}

TEST(BootstrapMedianInterval, IsSeededAndDropsNaN) {
  const std::vector<double> values = {3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.6};
  const Interval a = bootstrap_median_interval(values, 0.95, 2000, 7);
  EXPECT_EQ(a, bootstrap_median_interval(values, 0.95, 2000, 7));
  std::vector<double> with_nan = values;
  with_nan.insert(with_nan.begin() + 2, kNaN);
  EXPECT_EQ(a, bootstrap_median_interval(with_nan, 0.95, 2000, 7));
  // Another seed draws other resamples: with only 3 resamples the bounds follow the draws.
  std::set<std::pair<double, double>> seen;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const Interval i = bootstrap_median_interval(values, 0.95, 3, seed);
    seen.emplace(i.low, i.high);
  }
  EXPECT_GT(seen.size(), 5U);
}

TEST(BootstrapMedianInterval, IdenticalValuesGiveAZeroWidthInterval) {
  const Interval i = bootstrap_median_interval({2.5, 2.5, 2.5, 2.5}, 0.95, 500, 1);
  EXPECT_EQ(i.low, 2.5);
  EXPECT_EQ(i.high, 2.5);
}

TEST(BootstrapMedianInterval, FewerThanTwoValuesHaveNoInterval) {
  EXPECT_TRUE(std::isnan(bootstrap_median_interval({}, 0.95, 100, 1).low));
  EXPECT_TRUE(std::isnan(bootstrap_median_interval({1.0, kNaN}, 0.95, 100, 1).high));
}

TEST(BootstrapMedianInterval, RefusesBadParameters) {
  EXPECT_THROW(bootstrap_median_interval({1, 2}, 1.0, 100, 1), std::invalid_argument);
  EXPECT_THROW(bootstrap_median_interval({1, 2}, 0.0, 100, 1), std::invalid_argument);
  EXPECT_THROW(bootstrap_median_interval({1, 2}, 0.9, 0, 1), std::invalid_argument);
}

RepetitionFigures rep(int64_t k, bool ok, double median_s, double throughput) {
  return {"id" + std::to_string(k), k, ok, median_s, throughput};
}

TEST(SummarizeSeries, FiguresOfTheOkRepetitions) {
  // Repetition 3 failed: it is listed, not counted. Medians 0.10, 0.12, 0.11, 0.13:
  // median 0.115, spread (0.13 - 0.10) / 0.115 = 0.26 > 0.10: they disagree.
  const SeriesSummary s = summarize_series(
      "abc", "step", 5,
      {rep(4, true, 0.13, 77.0), rep(0, true, 0.10, 100.0), rep(1, true, 0.12, 83.0),
       rep(2, true, 0.11, 91.0), rep(3, false, kNaN, kNaN)});
  EXPECT_EQ(s.cells, (std::vector<std::string>{"id0", "id1", "id2", "id3", "id4"}));
  EXPECT_EQ(s.completed, 4);
  EXPECT_EQ(s.repetitions, 5);
  EXPECT_DOUBLE_EQ(s.median_s, 0.115);
  EXPECT_DOUBLE_EQ(s.throughput, 87.0);
  EXPECT_NEAR(s.spread_rel, 0.03 / 0.115, 1e-12);
  EXPECT_TRUE(s.disagree);
  EXPECT_TRUE(std::isnan(s.repetition_median_s[3]));
  EXPECT_EQ(s.seed, fnv1a64("abc"));
  const Interval expected =
      bootstrap_median_interval({0.10, 0.12, 0.11, 0.13}, kConfidence, kBootstrapResamples, s.seed);
  EXPECT_EQ(s.median_interval, expected);
  EXPECT_LE(s.median_interval.low, s.median_s);
  EXPECT_GE(s.median_interval.high, s.median_s);
}

TEST(SummarizeSeries, RepetitionsWithinTenPercentAgree) {
  const SeriesSummary s = summarize_series(
      "x", "batch", 3,
      {rep(0, true, 1.00, 10.0), rep(1, true, 1.05, 9.5), rep(2, true, 1.09, 9.2)});
  EXPECT_NEAR(s.spread_rel, 0.09 / 1.05, 1e-12);
  EXPECT_FALSE(s.disagree);
}

TEST(RepetitionsMatrix, EveryCellRunsNTimesAndRepetitionZeroKeepsItsId) {
  const std::string base =
      "sweep:\n  batch_sizes: [4, 8]\nexperiments:\n  - name: a\n    model: mlp\n";
  const auto plain = load_matrix_text("m.yaml", base);
  const auto repeated = load_matrix_text("m.yaml", base + "defaults: {repetitions: 3}\n");
  ASSERT_EQ(plain.cells.size(), 2U);
  ASSERT_EQ(repeated.cells.size(), 6U);
  std::set<std::string> ids;
  std::map<std::string, int> per_series;
  for (const auto& cell : repeated.cells) {
    ids.insert(cell.cell_id);
    ++per_series[series_id(cell)];
    EXPECT_EQ(cell.repetitions, 3);
    EXPECT_NE(cell_label(cell).find("/rep" + std::to_string(cell.repetition)), std::string::npos);
    if (cell.repetition == 0) {
      EXPECT_EQ(series_id(cell), cell.cell_id);
    }
    // The spec JSON round trip keeps the repetition (resume matches by id).
    EXPECT_EQ(compute_cell_id(cell_spec_from_json(to_json(cell))), cell.cell_id);
  }
  EXPECT_EQ(ids.size(), 6U);
  EXPECT_EQ(per_series.size(), 2U);
  for (const auto& [id, count] : per_series) EXPECT_EQ(count, 3) << id;
  // Without repetitions the ids are those of earlier scalebench versions: repetitions 1
  // adds nothing to the identity.
  const auto one = load_matrix_text("m.yaml", base + "defaults: {repetitions: 1}\n");
  EXPECT_EQ(one.cells.front().cell_id, plain.cells.front().cell_id);
  EXPECT_EQ(cell_label(one.cells.front()).find("/rep"), std::string::npos);
}

// Note [Adaptive repetitions]: auto makes max_repetitions runs marked adaptive, in the identity
// (an auto series is not the fixed one), and the flag survives the spec's JSON round trip.
TEST(RepetitionsMatrix, AutoMakesMaxRepetitionsAdaptiveRuns) {
  const std::string base =
      "sweep:\n  batch_sizes: [4]\nexperiments:\n  - name: a\n    model: mlp\n";
  const auto adaptive =
      load_matrix_text("m.yaml", base + "defaults: {repetitions: auto, max_repetitions: 6}\n");
  const auto fixed = load_matrix_text("m.yaml", base + "defaults: {repetitions: 6}\n");
  ASSERT_EQ(adaptive.cells.size(), 6U);
  std::set<std::string> series;
  for (size_t i = 0; i < adaptive.cells.size(); ++i) {
    const CellSpec& cell = adaptive.cells[i];
    EXPECT_TRUE(cell.adaptive_repetitions);
    EXPECT_EQ(cell.repetitions, 6);
    EXPECT_NE(cell.cell_id, fixed.cells[i].cell_id);
    series.insert(series_id(cell));
    const CellSpec back = cell_spec_from_json(to_json(cell));
    EXPECT_TRUE(back.adaptive_repetitions);
    EXPECT_EQ(compute_cell_id(back), cell.cell_id);
  }
  EXPECT_EQ(series.size(), 1U);
  EXPECT_FALSE(fixed.cells.front().adaptive_repetitions);
  EXPECT_EQ(load_matrix_text("m.yaml", base + "defaults: {repetitions: auto}\n").cells.size(), 20U)
      << "max_repetitions' default";
}

TEST(RepetitionsMatrix, ZeroRepetitionsIsAnInputErrorNamingTheLine) {
  try {
    load_matrix_text("m.yaml", "experiments:\n  - name: a\n    model: mlp\n    repetitions: 0\n");
    FAIL() << "expected MatrixError";
  } catch (const MatrixError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("m.yaml:4"), std::string::npos) << what;
    EXPECT_NE(what.find("repetitions"), std::string::npos) << what;
  }
}

nlohmann::json overview_cell(const CellSpec& cell, const std::string& status, double median_s) {
  nlohmann::json summary = nullptr;
  if (status == "ok") {
    summary = {
        {"metric", "step"}, {"median_s", median_s}, {"throughput_samples_per_s", 1.0 / median_s}};
  }
  return {{"spec", to_json(cell)}, {"status", status}, {"summary", summary}};
}

TEST(SeriesOfOverview, GroupsTheRepetitionsOfEachCell) {
  const auto m = load_matrix_text(
      "m.yaml",
      "sweep:\n  batch_sizes: [4, 8]\ndefaults: {repetitions: 2}\nexperiments:\n  - name: a\n"
      "    model: mlp\n  - name: single\n    model: mlp\n    repetitions: 1\n");
  ASSERT_EQ(m.cells.size(), 6U);
  nlohmann::json overview = {{"cells", nlohmann::json::object()}};
  for (const auto& cell : m.cells) {
    const bool failed = cell.batch_size == 8 && cell.repetition == 1;
    overview["cells"][cell.cell_id] = overview_cell(
        cell, failed ? "failed" : "ok", 0.01 * static_cast<double>(1 + cell.repetition));
  }
  const auto series = series_of_overview(overview);
  ASSERT_EQ(series.size(), 2U);  // the cells of `single` are not repeated
  for (const auto& s : series) {
    EXPECT_EQ(s.repetitions, 2);
    ASSERT_EQ(s.cells.size(), 2U);
    EXPECT_EQ(s.cells.front(), s.series_id);
    EXPECT_EQ(s.metric, "step");
  }
  const auto failed = std::find_if(series.begin(), series.end(),
                                   [](const SeriesSummary& s) { return s.completed == 1; });
  ASSERT_NE(failed, series.end());
  EXPECT_DOUBLE_EQ(failed->median_s, 0.01);
  EXPECT_TRUE(std::isnan(failed->median_interval.low));
}

}  // namespace
}  // namespace scalebench
