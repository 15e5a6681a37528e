// Batch size `auto`: the search for the largest batch that fits, and the figures drawn from
// its probes. Pure (no MPI, no Torch): the worker runs the probes (worker/batch_probe.cc),
// the summary computes the figures (results/cell_summary.cc).
//
// Note [Batch search]
// ~~~~~~~~~~~~~~~~~~~
// A cell with `batch_size: auto` probes upward from `min_batch`, doubling, until a probe
// does not fit (a real out-of-memory error of the allocator, or a peak memory above the
// cell's memory budget on any rank) or `max_batch` is reached (the last doubling is clamped
// to it); then it bisects between the last batch that fit and the first that did not, until
// they are within `batch_precision` of each other (default 2 %: the gap is at most
// max(1, 2 % of the batch that fit), so below batch 100 they are adjacent). So `max_batch_ok`
// fits and `oom_batch` does not, `oom_batch - max_batch_ok` at most that gap, assuming memory
// grows with the batch: a ResNet-18 at batch ~1,900 no longer spends six probes telling 1,921
// from 1,922. The search also keeps to the cell's time (Note [Search time] in
// protocol/group_batch_search.h): when it stops for time the boundary it holds is recorded. Every
// probe of a group is one outcome: all ranks run it and the group takes the worst (Note [Group
// probes] in worker/batch_probe.h).
//
// From the probes that fit (docs/batch-size.md):
//   best_batch         the highest throughput
//   knee_batch         the smallest batch within 5 % of the best throughput: beyond it a
//                      larger batch buys little
//   slo_batch          the largest batch whose p99 time meets `latency_slo_ms` (0: no SLO,
//                      or none meets it)
//   recommended_batch  the highest throughput among the batches whose peak memory is at most
//                      (1 - safety_margin) x the budget and, with an SLO, that meet it; when
//                      none is within the margin, the smallest batch that fit. The cell's
//                      timed loop runs at this batch.
//   memory_per_sample_bytes  least-squares slope of peak memory over batch (NaN with fewer
//                      than two batches)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace scalebench {

/// How a probe ended. Stored as text in the `probes` dataset's `status` column.
enum class ProbeStatus {
  kOk,          ///< fit: every rank completed it within the budget
  kOom,         ///< a rank's allocator ran out of memory
  kOverBudget,  ///< a rank's peak memory was above the memory budget
};
std::string to_string(ProbeStatus status);

/// One probe of a group, already reduced over its ranks (worst status, slowest time,
/// largest memory).
struct BatchProbe {
  int64_t batch = 0;
  ProbeStatus status = ProbeStatus::kOk;
  double median_s = 0;           ///< median step (train) or batch (inference) time, slowest rank
  double p99_s = 0;              ///< p99 of the same
  double throughput = 0;         ///< samples/s of the group: batch x world / median_s (0 if not ok)
  double peak_memory_bytes = 0;  ///< max over ranks (GPU: allocated; CPU: RSS)
  /// Each measured iteration's time, slowest rank (empty when the probe did not complete).
  std::vector<double> times_s;
  bool operator==(const BatchProbe&) const = default;
};

/// The doubling-then-bisecting search of Note [Batch search].
class BatchSearch {
 public:
  /// Throws Error unless 1 <= min_batch <= max_batch and 0 <= precision < 1. `precision`:
  /// the bisection ends once first_failed - max_ok <= max(1, precision x max_ok).
  BatchSearch(int64_t min_batch, int64_t max_batch, double precision = 0);
  /// The next batch to probe; nullopt when the search is over.
  [[nodiscard]] std::optional<int64_t> next() const { return next_; }
  /// The outcome of probing next().
  void record(bool fits);
  /// Largest batch that fit (0: not even min_batch), smallest that did not (0: none).
  [[nodiscard]] int64_t max_ok() const { return max_ok_; }
  [[nodiscard]] int64_t first_failed() const { return first_failed_; }

 private:
  int64_t max_batch_;
  double precision_;
  int64_t max_ok_ = 0;
  int64_t first_failed_ = 0;
  std::optional<int64_t> next_;
};

/// What the user asked of the choice (the cell's settings).
struct BatchChoiceSettings {
  double safety_margin = 0.1;      ///< fraction of the budget kept free
  double latency_slo_s = 0;        ///< 0: none
  double memory_budget_bytes = 0;  ///< the budget the probes were judged by
};

/// The figures of Note [Batch search]; 0 for a batch figure that does not exist.
struct BatchFigures {
  int64_t max_batch_ok = 0;
  int64_t oom_batch = 0;
  int64_t best_batch = 0;
  int64_t knee_batch = 0;
  int64_t slo_batch = 0;
  int64_t recommended_batch = 0;
  double memory_per_sample_bytes = 0;  ///< NaN with fewer than two batches that fit
};

/// Share of the best throughput within which a batch counts as on the plateau.
inline constexpr double kKneeFraction = 0.95;

BatchFigures batch_figures(const std::vector<BatchProbe>& probes,
                           const BatchChoiceSettings& settings);

}  // namespace scalebench
