#include "common/cell/repetition_stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/cell/cell_spec.h"
#include "common/cell/stats.h"

namespace scalebench {
namespace {

double median_of(std::vector<double>& values) { return percentile(values, 50.0); }

}  // namespace

uint64_t splitmix64_next(uint64_t& state) {
  state += 0x9e3779b97f4a7c15ULL;
  uint64_t z = state;
  z = (z ^ (z >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27U)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31U);
}

Interval bootstrap_median_interval(const std::vector<double>& values, double confidence,
                                   int resamples, uint64_t seed) {
  if (!(confidence > 0.0 && confidence < 1.0)) {
    throw std::invalid_argument("bootstrap confidence must be in (0, 1)");
  }
  if (resamples < 1) throw std::invalid_argument("bootstrap resamples must be >= 1");
  std::vector<double> finite;
  for (const double v : values) {
    if (!std::isnan(v)) finite.push_back(v);
  }
  if (finite.size() < 2) return {kNaN, kNaN};
  uint64_t state = seed;
  std::vector<double> medians;
  medians.reserve(static_cast<size_t>(resamples));
  std::vector<double> sample(finite.size());
  for (int b = 0; b < resamples; ++b) {
    for (auto& v : sample) v = finite[splitmix64_next(state) % finite.size()];
    medians.push_back(median_of(sample));
  }
  const double tail = (1.0 - confidence) / 2.0;
  return {percentile(medians, 100.0 * tail), percentile(medians, 100.0 * (1.0 - tail))};
}

SeriesSummary summarize_series(const std::string& series_id, const std::string& metric,
                               int64_t repetitions, std::vector<RepetitionFigures> reps) {
  std::sort(reps.begin(), reps.end(),
            [](const auto& a, const auto& b) { return a.repetition < b.repetition; });
  SeriesSummary s;
  s.series_id = series_id;
  s.metric = metric;
  s.repetitions = repetitions;
  s.seed = fnv1a64(series_id);
  std::vector<double> medians;
  std::vector<double> throughputs;
  for (const auto& r : reps) {
    s.cells.push_back(r.cell_id);
    const bool counted = r.ok && std::isfinite(r.median_s);
    s.repetition_median_s.push_back(counted ? r.median_s : kNaN);
    if (!counted) continue;
    medians.push_back(r.median_s);
    throughputs.push_back(r.throughput);
  }
  s.completed = static_cast<int64_t>(medians.size());
  s.median_interval = bootstrap_median_interval(medians, kConfidence, kBootstrapResamples, s.seed);
  // The same draws for both figures: the throughput's interval comes from the same
  // resamples of repetitions.
  s.throughput_interval =
      bootstrap_median_interval(throughputs, kConfidence, kBootstrapResamples, s.seed);
  s.median_s = median_of(medians);
  s.throughput = median_of(throughputs);
  if (medians.empty()) {
    s.spread_rel = kNaN;
  } else {
    const auto [low, high] = std::minmax_element(medians.begin(), medians.end());
    s.spread_rel = (*high - *low) / s.median_s;
  }
  s.disagree = s.spread_rel > kMaxSpreadRel;
  return s;
}

}  // namespace scalebench
