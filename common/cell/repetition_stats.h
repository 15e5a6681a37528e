// Repetitions of a cell and what they say together: pure functions.
//
// Note [Repetitions]
// ~~~~~~~~~~~~~~~~~~
// `repetitions: N` makes N cells of each cell (matrix expansion): repetition k's spec has
// `repetition: k`, in its identity only when k > 0, so repetition 0 keeps the id the cell
// has without repetitions and that id names the whole series (series_id in cell_spec.h).
// Every repetition is a cell of its own in the results file (status, raw timings, summary,
// resume), so nothing about running or storing a cell changes.
//
// Order: with `interleave` (the default) the repetitions of every interleaved cell are run
// in a seeded random order (dispatch_order.h), so a drift of the machine (thermal,
// another job, a page cache filling) spreads over all cells instead of biasing the ones
// that happened to run during it.
//
// Between repetitions (`/series/<series_id>` of the results file, written by rank 0 at the
// end of a run from the cells in the file): each ok repetition contributes its summary's
// `median_s` (the step or batch time) and `throughput_samples_per_s`. The series figure is
// the median over repetitions; its interval is a percentile bootstrap: kBootstrapResamples
// resamples of the repetitions' values with replacement, the median of each, and the
// (1-c)/2 and (1+c)/2 percentiles (linear interpolation, numpy's default) of those medians,
// c = kConfidence. The draws come from splitmix64 seeded with the FNV-1a-64 hash of the
// series id (stored), index = next() % n, so the interval is the same on every machine and
// a reader can recompute it exactly (tests/analysis does, in numpy). The repetitions
// disagree when their medians span more than kMaxSpreadRel of the series median: then the
// machine changed under the run and the interval understates the uncertainty.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace scalebench {

inline constexpr int kBootstrapResamples = 10000;
inline constexpr double kConfidence = 0.95;
inline constexpr double kMaxSpreadRel = 0.10;

/// splitmix64: advances `state` and returns the next 64-bit value.
uint64_t splitmix64_next(uint64_t& state);

struct Interval {
  double low = 0.0;
  double high = 0.0;
  bool operator==(const Interval&) const = default;
};

/// Percentile-bootstrap interval of the median of `values` (NaN entries dropped) per Note
/// [Repetitions]; {NaN, NaN} for fewer than 2 values. Throws std::invalid_argument for
/// confidence outside (0, 1) or resamples < 1.
Interval bootstrap_median_interval(const std::vector<double>& values, double confidence,
                                   int resamples, uint64_t seed);

/// One repetition as the series sees it.
struct RepetitionFigures {
  std::string cell_id;
  int64_t repetition = 0;
  bool ok = false;          ///< status ok with a summary
  double median_s = 0.0;    ///< the summary's median step/batch time (NaN when not ok)
  double throughput = 0.0;  ///< the summary's throughput_samples_per_s (NaN when not ok)
};

struct SeriesSummary {
  std::string series_id;
  std::string metric;                       ///< "step" or "batch"
  int64_t repetitions = 0;                  ///< as the matrix asked
  std::vector<std::string> cells;           ///< cell id of each repetition found, repetition order
  std::vector<double> repetition_median_s;  ///< per entry of `cells`; NaN when not ok
  int64_t completed = 0;                    ///< repetitions with a finite median
  double median_s = 0.0;                    ///< median over the completed repetitions
  Interval median_interval;
  double throughput = 0.0;  ///< median of the repetitions' throughputs
  Interval throughput_interval;
  double spread_rel = 0.0;  ///< (max - min) / median of the repetitions' medians
  bool disagree = false;    ///< spread_rel > kMaxSpreadRel
  uint64_t seed = 0;        ///< fnv1a64(series_id)
};

/// The series figures of `reps` (any order; sorted by repetition here).
SeriesSummary summarize_series(const std::string& series_id, const std::string& metric,
                               int64_t repetitions, std::vector<RepetitionFigures> reps);

}  // namespace scalebench
