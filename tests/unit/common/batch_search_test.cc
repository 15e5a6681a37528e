// Note [Batch search]: the search finds the exact boundary for every threshold, and the
// figures equal hand-computed values.
#include "common/cell/batch_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "common/base/error.h"
#include "common/cell/batch_refinement.h"

namespace scalebench {
namespace {

/// Runs the search against "a batch fits when it is <= threshold"; returns the probed batches.
std::vector<int64_t> search(BatchSearch& s, int64_t threshold) {
  std::vector<int64_t> probed;
  while (const auto next = s.next()) {
    probed.push_back(*next);
    s.record(*next <= threshold);
    if (probed.size() > 200) break;
  }
  return probed;
}

TEST(BatchSearch, StopsWithinItsPrecisionAndNeverCrossesTheBoundary) {
  // Note [Batch search]: with batch_precision p the gap between the largest batch that fit
  // and the smallest that did not is at most max(1, p x the one that fit), never wrong.
  for (const double precision : {0.0, 0.02, 0.1}) {
    for (const int64_t threshold : {1, 7, 99, 100, 1921, 5000, 40000}) {
      SCOPED_TRACE(testing::Message() << "precision " << precision << " threshold " << threshold);
      BatchSearch s(1, 65536, precision);
      const auto probed = search(s, threshold);
      ASSERT_GT(s.max_ok(), 0);
      EXPECT_LE(s.max_ok(), threshold);
      EXPECT_GT(s.first_failed(), threshold);
      const auto gap = std::max<int64_t>(
          1, static_cast<int64_t>(std::floor(precision * static_cast<double>(s.max_ok()))));
      EXPECT_LE(s.first_failed() - s.max_ok(), gap);
      if (precision == 0) EXPECT_EQ(s.first_failed(), threshold + 1);
    }
  }
  // The ResNet-18 case of issue 50: 1,921 fits, 1,922 not. Exact: 22 probes; at 2 %: fewer.
  BatchSearch exact(1, 65536, 0);
  BatchSearch coarse(1, 65536, 0.02);
  const auto exact_probes = search(exact, 1921).size();
  const auto coarse_probes = search(coarse, 1921).size();
  EXPECT_LT(coarse_probes + 3, exact_probes) << exact_probes << " vs " << coarse_probes;
  EXPECT_THROW(BatchSearch(1, 4, 1.0), Error);
  EXPECT_THROW(BatchSearch(1, 4, -0.1), Error);
}

TEST(BatchSearch, FindsTheExactBoundaryForEveryThreshold) {
  for (const int64_t min_batch : {1, 3, 8}) {
    for (const int64_t max_batch : {8, 13, 64, 100, 65536}) {
      if (max_batch < min_batch) continue;
      for (int64_t threshold = 0; threshold <= 130; ++threshold) {
        SCOPED_TRACE(testing::Message()
                     << "min " << min_batch << " max " << max_batch << " threshold " << threshold);
        BatchSearch s(min_batch, max_batch);
        const auto probed = search(s, threshold);
        const int64_t expected_ok = threshold < min_batch ? 0 : std::min(threshold, max_batch);
        EXPECT_EQ(expected_ok, s.max_ok());
        if (threshold < min_batch) {
          EXPECT_EQ(min_batch, s.first_failed());
          EXPECT_EQ(1U, probed.size());
        } else if (threshold >= max_batch) {
          EXPECT_EQ(0, s.first_failed());
          EXPECT_EQ(max_batch, probed.back());
        } else {
          EXPECT_EQ(threshold + 1, s.first_failed());  // adjacent: the boundary is exact
        }
        // Doubling then bisecting: about two probes per power of two, never a batch twice.
        EXPECT_LE(probed.size(), 2 * static_cast<size_t>(std::log2(max_batch) + 2));
        std::vector<int64_t> sorted = probed;
        std::sort(sorted.begin(), sorted.end());
        EXPECT_EQ(sorted.end(), std::adjacent_find(sorted.begin(), sorted.end()));
        for (const int64_t b : probed) {
          EXPECT_GE(b, min_batch);
          EXPECT_LE(b, max_batch);
        }
      }
    }
  }
}

TEST(BatchSearch, ProbesInTheDocumentedOrder) {
  BatchSearch s(1, 1000);
  EXPECT_EQ((std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 48, 40, 44, 42, 43}), search(s, 42));
  BatchSearch clamped(3, 20);
  EXPECT_EQ((std::vector<int64_t>{3, 6, 12, 20}), search(clamped, 1000));
}

TEST(BatchSearch, RefusesABadRange) {
  EXPECT_THROW(BatchSearch(0, 4), Error);
  EXPECT_THROW(BatchSearch(8, 4), Error);
}

BatchProbe probe(int64_t batch, ProbeStatus status, double median_s, double p99_s, double memory) {
  BatchProbe p;
  p.batch = batch;
  p.status = status;
  p.median_s = median_s;
  p.p99_s = p99_s;
  p.throughput = status == ProbeStatus::kOk ? static_cast<double>(batch) / median_s : 0;
  p.peak_memory_bytes = memory;
  return p;
}

TEST(BatchFigures, EqualHandComputedValues) {
  // Throughput (samples/s, world 1): 1/0.010 = 100, 2/0.012 = 166.7, 4/0.016 = 250,
  // 8/0.0305 = 262.3, 16/0.062 = 258.1; 32 over budget. Memory 100 + 10 x batch MB.
  const double mb = 1e6;
  const std::vector<BatchProbe> probes = {
      probe(1, ProbeStatus::kOk, 0.010, 0.011, 110 * mb),
      probe(2, ProbeStatus::kOk, 0.012, 0.013, 120 * mb),
      probe(4, ProbeStatus::kOk, 0.016, 0.018, 140 * mb),
      probe(8, ProbeStatus::kOk, 0.0305, 0.033, 180 * mb),
      probe(16, ProbeStatus::kOk, 0.062, 0.070, 260 * mb),
      probe(32, ProbeStatus::kOverBudget, 0.125, 0.130, 420 * mb),
      probe(24, ProbeStatus::kOom, 0, 0, 0),
  };
  BatchChoiceSettings settings;
  settings.memory_budget_bytes = 280 * mb;  // margin 0.1: at most 252 MB
  settings.latency_slo_s = 0.020;
  const BatchFigures f = batch_figures(probes, settings);
  EXPECT_EQ(16, f.max_batch_ok);
  EXPECT_EQ(24, f.oom_batch);  // the smallest batch that did not fit
  EXPECT_EQ(8, f.best_batch);
  EXPECT_EQ(4, f.knee_batch);         // 250 >= 0.95 x 262.3 = 249.2; 166.7 is not
  EXPECT_EQ(4, f.slo_batch);          // p99 0.018 <= 0.020; 0.033 is not
  EXPECT_EQ(4, f.recommended_batch);  // the SLO rules out 8 and 16
  // Memory is exactly 100 MB + 10 MB x batch over the batches that fit.
  EXPECT_NEAR(10 * mb, f.memory_per_sample_bytes, 1e-3);

  settings.latency_slo_s = 0;  // no SLO: 16 is beyond the margin (260 > 252), 8 is best
  const BatchFigures no_slo = batch_figures(probes, settings);
  EXPECT_EQ(0, no_slo.slo_batch);
  EXPECT_EQ(8, no_slo.recommended_batch);

  settings.memory_budget_bytes = 100 * mb;  // nothing within the margin: the smallest fit
  EXPECT_EQ(1, batch_figures(probes, settings).recommended_batch);
}

TEST(BatchFigures, NothingFits) {
  const BatchFigures f = batch_figures({probe(1, ProbeStatus::kOom, 0, 0, 0)}, {});
  EXPECT_EQ(0, f.max_batch_ok);
  EXPECT_EQ(1, f.oom_batch);
  EXPECT_EQ(0, f.recommended_batch);
  EXPECT_TRUE(std::isnan(f.memory_per_sample_bytes));
}

TEST(BatchFigures, StatusText) {
  EXPECT_EQ("ok", to_string(ProbeStatus::kOk));
  EXPECT_EQ("oom", to_string(ProbeStatus::kOom));
  EXPECT_EQ("over_budget", to_string(ProbeStatus::kOverBudget));
}

// Note [Batch refinement]: the memory line through the probes that fit names the largest
// batch inside the margin; the worker probes it once when the search did not.
TEST(BatchRefinement, NamesTheLargestBatchTheLinePutsInsideTheMargin) {
  const double mb = 1e6;
  // 100 MB + 1 MB x batch; the search: 1..128 fit, 256 over, bisected down to 199 / 200.
  std::vector<BatchProbe> probes;
  for (const int64_t b : {1, 2, 4, 8, 16, 32, 64, 128}) {
    probes.push_back(probe(b, ProbeStatus::kOk, 0.001 * static_cast<double>(b) / (1.0 + b / 256.0),
                           0.0, (100.0 + static_cast<double>(b)) * mb));
  }
  probes.push_back(probe(256, ProbeStatus::kOverBudget, 0.1, 0.1, 356 * mb));
  for (const int64_t b : {192, 196, 198, 199}) {
    probes.push_back(probe(b, ProbeStatus::kOk, 0.001 * static_cast<double>(b) / (1.0 + b / 256.0),
                           0.0, (100.0 + static_cast<double>(b)) * mb));
  }
  probes.push_back(probe(200, ProbeStatus::kOverBudget, 0.1, 0.1, 300.5 * mb));
  BatchChoiceSettings settings;
  settings.memory_budget_bytes = 300 * mb;  // margin 0.1: at most 270 MB, i.e. batch 170
  const auto line = memory_line(probes);
  ASSERT_TRUE(line.has_value());
  EXPECT_NEAR(line->bytes_per_sample, 1 * mb, 1e-3);
  EXPECT_NEAR(line->intercept_bytes, 100 * mb, 1e-2);
  EXPECT_EQ(batch_figures(probes, settings).recommended_batch, 128);  // the probed power of two
  EXPECT_EQ(refined_batch(probes, settings), 170);

  // Once probed (within the margin, faster), it is the recommended batch; nothing more.
  probes.push_back(probe(170, ProbeStatus::kOk, 0.001 * 170 / (1.0 + 170 / 256.0), 0.0, 270 * mb));
  EXPECT_EQ(batch_figures(probes, settings).recommended_batch, 170);
  EXPECT_EQ(refined_batch(probes, settings), std::nullopt);
}

// The peaks of a ResNet-18 search on the CPU (MiB): the smallest batches hold the start-up's
// one-time buffers, so memory is linear only further up. A least-squares line through every
// probe put the margin's edge at 13, whose peak is outside it; the two probes bracketing the
// edge (8 and 16) name 12, which is inside.
TEST(BatchRefinement, TheLineNearTheEdgeIgnoresTheStartUpOfTheSmallestBatches) {
  const double mib = 1024.0 * 1024.0;
  std::vector<BatchProbe> probes;
  for (const auto& [batch, peak] : std::vector<std::pair<int64_t, double>>{{1, 129.414},
                                                                           {2, 152.344},
                                                                           {4, 155.75},
                                                                           {8, 162.563},
                                                                           {16, 176.188},
                                                                           {20, 183.0},
                                                                           {22, 186.406},
                                                                           {23, 188.11}}) {
    probes.push_back(
        probe(batch, ProbeStatus::kOk, 0.1 * static_cast<double>(batch), 0.0, peak * mib));
  }
  probes.push_back(probe(32, ProbeStatus::kOverBudget, 0.1, 0.1, 203.438 * mib));
  probes.push_back(probe(24, ProbeStatus::kOverBudget, 0.1, 0.1, 189.813 * mib));
  BatchChoiceSettings settings;
  settings.memory_budget_bytes = 170.1 / 0.9 * mib;  // the edge: 170.1 MiB
  const double cap = 170.1 * mib;
  const auto everywhere = memory_line(probes);
  ASSERT_TRUE(everywhere.has_value());
  EXPECT_EQ(std::floor((cap - everywhere->intercept_bytes) / everywhere->bytes_per_sample), 13)
      << "the least-squares line through every probe misplaces the edge";
  const auto near = margin_line(probes, cap);
  ASSERT_TRUE(near.has_value());
  EXPECT_NEAR(near->bytes_per_sample, (176.188 - 162.563) / 8 * mib, 1.0);
  EXPECT_EQ(refined_batch(probes, settings), 12);
}

TEST(BatchRefinement, NothingToRefineWithoutABudgetARisingLineOrRoom) {
  const double mb = 1e6;
  const std::vector<BatchProbe> two = {probe(1, ProbeStatus::kOk, 0.01, 0.01, 101 * mb),
                                       probe(2, ProbeStatus::kOk, 0.01, 0.01, 102 * mb)};
  EXPECT_EQ(refined_batch(two, {}), std::nullopt);  // no budget: no margin to fill
  BatchChoiceSettings settings;
  settings.memory_budget_bytes = 1000 * mb;
  // The line allows ~798 but only 2 was measured to fit: never above the largest fit.
  EXPECT_EQ(refined_batch(two, settings), std::nullopt);
  const std::vector<BatchProbe> flat = {probe(1, ProbeStatus::kOk, 0.01, 0.01, 100 * mb),
                                        probe(2, ProbeStatus::kOk, 0.01, 0.01, 100 * mb)};
  EXPECT_EQ(refined_batch(flat, settings), std::nullopt);  // memory does not grow
  EXPECT_FALSE(memory_line({probe(4, ProbeStatus::kOk, 0.01, 0.01, 1)}).has_value());
}

}  // namespace
}  // namespace scalebench
