#include "results/cell_summary.h"

#include <algorithm>
#include <cmath>

#include "common/cell/adaptive_stop.h"
#include "common/cell/stats.h"

namespace scalebench {
namespace {

/// Read access to one rank's timing table by phase name; NaN for anything missing.
class RankTable {
 public:
  explicit RankTable(const RankResult& rank) : rank_(rank) {}

  [[nodiscard]] size_t rows() const { return rank_.iterations(); }
  [[nodiscard]] size_t first_measured_row() const {
    return static_cast<size_t>(std::max(0, rank_.warmup_iterations));
  }
  [[nodiscard]] bool is_measured(size_t row) const {
    return row >= first_measured_row() && row < rows();
  }
  [[nodiscard]] double value(size_t row, const std::string& phase) const {
    if (!is_measured(row)) return kNaN;
    const auto it = std::find(rank_.phases.begin(), rank_.phases.end(), phase);
    if (it == rank_.phases.end()) return kNaN;
    const auto column = static_cast<size_t>(it - rank_.phases.begin());
    return rank_.timings_s[row * rank_.phases.size() + column];
  }
  [[nodiscard]] double metric(const std::string& name) const {
    const auto it = rank_.metrics.find(name);
    return it == rank_.metrics.end() ? kNaN : it->second;
  }

 private:
  const RankResult& rank_;
};

size_t max_rows(const std::vector<RankTable>& tables) {
  size_t rows = 0;
  for (const auto& t : tables) rows = std::max(rows, t.rows());
  return rows;
}

/// Per row: the slowest rank's value of `phase` (NaN-free rows only).
std::vector<double> slowest_rank_per_row(const std::vector<RankTable>& tables,
                                         const std::string& phase) {
  std::vector<double> series;
  for (size_t row = 0; row < max_rows(tables); ++row) {
    double slowest = kNaN;
    for (const auto& t : tables) {
      const double v = t.value(row, phase);
      if (!std::isnan(v) && (std::isnan(slowest) || v > slowest)) slowest = v;
    }
    if (!std::isnan(slowest)) series.push_back(slowest);
  }
  return series;
}

/// median(first half) / median(second half) - 1 of `series`; NaN below 4 values.
double warmup_drift(const std::vector<double>& series) {
  const size_t half = series.size() / 2;
  if (half < 2) return kNaN;
  const std::vector<double> first(series.begin(), series.begin() + static_cast<long>(half));
  const std::vector<double> last(series.end() - static_cast<long>(half), series.end());
  return summarize(first).median / summarize(last).median - 1.0;
}

/// Per row: the mean over ranks of `phase` (ranks without a value in that row left out).
std::vector<double> rank_mean_per_row(const std::vector<RankTable>& tables,
                                      const std::string& phase) {
  std::vector<double> series;
  for (size_t row = 0; row < max_rows(tables); ++row) {
    double sum = 0.0;
    int count = 0;
    for (const auto& t : tables) {
      const double v = t.value(row, phase);
      if (!std::isnan(v)) {
        sum += v;
        ++count;
      }
    }
    if (count > 0) series.push_back(sum / count);
  }
  return series;
}

std::vector<double> all_measured_values(const std::vector<RankTable>& tables,
                                        const std::string& phase) {
  std::vector<double> values;
  for (const auto& t : tables) {
    for (size_t row = t.first_measured_row(); row < t.rows(); ++row) {
      const double v = t.value(row, phase);
      if (!std::isnan(v)) values.push_back(v);
    }
  }
  return values;
}

double inference_samples(const CellSpec& cell, const std::vector<RankTable>& tables) {
  double reported = 0.0;
  bool every_rank_reports = !tables.empty();
  for (const auto& t : tables) {
    const double s = t.metric("samples");
    if (std::isnan(s))
      every_rank_reports = false;
    else
      reported += s;
  }
  if (every_rank_reports) return reported;
  if (cell.samples > 0) return static_cast<double>(cell.samples);
  return static_cast<double>(cell.batch_size) * cell.world_size * cell.measured_iterations;
}

double inference_throughput(const CellSpec& cell, const std::vector<RankTable>& tables,
                            const std::string& phase) {
  double slowest_total_s = kNaN;
  for (const auto& t : tables) {
    double total_s = 0.0;
    for (size_t row = t.first_measured_row(); row < t.rows(); ++row) {
      const double v = t.value(row, phase);
      if (!std::isnan(v)) total_s += v;
    }
    if (std::isnan(slowest_total_s) || total_s > slowest_total_s) slowest_total_s = total_s;
  }
  if (std::isnan(slowest_total_s) || slowest_total_s <= 0.0) return kNaN;
  return inference_samples(cell, tables) / slowest_total_s;
}

double peak_memory(const std::vector<RankTable>& tables) {
  for (const char* name : {"peak_allocated_bytes", "peak_rss_bytes"}) {
    double peak = kNaN;
    for (const auto& t : tables) {
      const double v = t.metric(name);
      if (!std::isnan(v) && (std::isnan(peak) || v > peak)) peak = v;
    }
    if (!std::isnan(peak)) return peak;
  }
  return kNaN;
}

/// Sum over ranks of a metric; NaN when a rank lacks it or there is no rank.
double sum_metric(const std::vector<RankTable>& tables, const char* name) {
  if (tables.empty()) return kNaN;
  double sum = 0.0;
  for (const auto& t : tables) sum += t.metric(name);  // NaN stays NaN
  return sum;
}

double mean_metric(const std::vector<RankTable>& tables, const char* name) {
  return sum_metric(tables, name) / static_cast<double>(tables.size());
}

// Note [CPU oversubscription]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On CPU each worker runs cpu_threads intra-op threads, plus the MPI backend's
// communication thread while a training cell reduces gradients (Note [MPI communication
// thread]). When the workers of a node run more of them than the node has cores, MPI's
// progress (which spins by default) takes cores from backward: the backward phase grows and
// comm_wait shrinks, and the split between them says more about the machine than the model.
// Each rank reports node_cores, node_workers and mpi_comm_threads; the summary keeps the
// worst ratio and `info` / the run's table warn above 1 (docs/metrics.md).
double cpu_threads_per_core(const std::vector<RankTable>& tables) {
  double worst = tables.empty() ? kNaN : 0.0;
  for (const auto& t : tables) {
    const double ratio = t.metric("node_workers") *
                         (t.metric("cpu_threads") + t.metric("mpi_comm_threads")) /
                         t.metric("node_cores");
    if (std::isnan(ratio)) return kNaN;
    worst = std::max(worst, ratio);
  }
  return worst;
}

/// Samples the measured loops processed: the global batches of the measured iterations
/// (training; the fewest any rank ran), or inference_samples.
double measured_samples(const CellSpec& cell, const std::vector<RankTable>& tables) {
  if (cell.mode != Mode::kTrain) return inference_samples(cell, tables);
  double iterations = kNaN;
  for (const auto& t : tables) {
    const double v = t.metric("measured_iterations");
    if (std::isnan(iterations) || v < iterations) iterations = v;
  }
  return static_cast<double>(cell.batch_size) * cell.world_size * iterations;
}

bool replicas_in_sync(const std::vector<RankTable>& tables, double rel_tolerance) {
  if (tables.empty()) return false;
  const double reference = tables.front().metric("param_checksum");
  for (const auto& t : tables) {
    const double v = t.metric("param_checksum");
    if (std::isnan(v)) return false;
    const double scale = std::max(std::fabs(v), std::fabs(reference));
    if (std::fabs(v - reference) > rel_tolerance * scale) return false;
  }
  return true;
}

}  // namespace

CellSummary summarize_cell(const CellSpec& spec, const std::vector<RankResult>& ranks) {
  const bool train = spec.mode == Mode::kTrain;
  std::vector<RankTable> tables;
  tables.reserve(ranks.size());
  for (const auto& r : ranks) tables.emplace_back(r);

  CellSummary s;
  CellSpec cell = spec;  // as it ran: batch_size auto becomes the chosen batch
  if (spec.batch_size == kBatchAuto) {
    const double chosen = tables.empty() ? kNaN : tables.front().metric("batch_size");
    cell.batch_size = std::isnan(chosen) ? 0 : static_cast<int64_t>(chosen);
    double budget = kNaN;
    for (const auto& t : tables) {
      const double v = t.metric("memory_budget_bytes");
      if (std::isnan(budget) || v < budget) budget = v;
    }
    s.memory_budget_bytes = budget;
    BatchChoiceSettings choice;
    choice.safety_margin = spec.safety_margin;
    choice.latency_slo_s = spec.latency_slo_ms / 1000.0;
    choice.memory_budget_bytes = std::isnan(budget) ? 0 : budget;
    // Every rank holds the same reduced probes; a rank that failed before them has none.
    const auto with_probes = std::find_if(ranks.begin(), ranks.end(),
                                          [](const RankResult& r) { return !r.probes.empty(); });
    s.batch_figures = batch_figures(
        with_probes == ranks.end() ? std::vector<BatchProbe>{} : with_probes->probes, choice);
  }
  s.batch_size = cell.batch_size;
  s.metric = train ? "step" : "batch";
  const std::vector<double> samples =
      train ? slowest_rank_per_row(tables, s.metric) : all_measured_values(tables, s.metric);
  const MedianInterval interval = median_interval(samples);
  s.median_ci_low_s = interval.count >= 2 ? interval.low : kNaN;
  s.median_ci_high_s = interval.count >= 2 ? interval.high : kNaN;
  for (const auto& r : ranks) {
    if (s.stop_reason.empty()) s.stop_reason = r.stop_reason;
    if (s.warmup_reason.empty()) s.warmup_reason = r.warmup_reason;
  }
  if (train) {
    s.time = summarize(samples);
    s.throughput_samples_per_s =
        s.time.median > 0.0 ? static_cast<double>(cell.batch_size) * cell.world_size / s.time.median
                            : kNaN;
  } else {
    s.time = summarize(samples);
    s.throughput_samples_per_s = inference_throughput(cell, tables, s.metric);
  }
  s.samples_per_s_per_worker =
      cell.world_size > 0 ? s.throughput_samples_per_s / cell.world_size : kNaN;
  for (const auto& phase : phase_union(ranks)) {
    s.phase_median_s[phase] = summarize(rank_mean_per_row(tables, phase)).median;
  }
  s.peak_memory_bytes = peak_memory(tables);
  s.final_loss_mean = train ? mean_metric(tables, "final_loss") : kNaN;
  s.cpu_threads_per_core = cpu_threads_per_core(tables);
  s.energy_j = sum_metric(tables, "gpu_energy_j");
  s.samples_per_joule = s.energy_j > 0 ? measured_samples(cell, tables) / s.energy_j : kNaN;
  const ValidityThresholds& limits = s.thresholds;
  s.valid_enough_iterations = s.time.count >= limits.min_iterations;
  // One notion of trust with the analysis (tables/quality.py): a cell that chose its own
  // iterations (stop_reason precise/budget/cap, Note [Iterations auto]) is judged by the
  // interval its median reached, not by its cv, which measures the machine's noise.
  const bool chose_iterations =
      s.stop_reason == "precise" || s.stop_reason == "budget" || s.stop_reason == "cap";
  s.valid_cv =
      chose_iterations ? s.stop_reason == "precise" : s.time.cv <= limits.max_cv;  // false for NaN
  // A program cell's replicas are checked only when its program reports param_checksum; a
  // replay cell has no parameters (Note [Replay workload]), so none.
  const bool checksums = (spec.program.command.empty() && spec.model.replay.empty()) ||
                         std::any_of(tables.begin(), tables.end(), [](const RankTable& t) {
                           return !std::isnan(t.metric("param_checksum"));
                         });
  s.valid_replicas_in_sync =
      train && checksums ? replicas_in_sync(tables, limits.replica_checksum_rel_tolerance) : true;
  s.drift = warmup_drift(train ? samples : rank_mean_per_row(tables, s.metric));
  s.valid_drift = !(std::abs(s.drift) > limits.max_drift);  // true for NaN
  // A cell whose worker found a reason not to trust it (a program that ran fewer steps than
  // asked, the branch's code shadowed: RankResult::untrusted_reasons, stored beside the
  // summary) is not valid either, so `info` and the end-of-run table never show it as valid.
  const bool trusted = std::all_of(ranks.begin(), ranks.end(), [](const RankResult& rank) {
    return rank.untrusted_reasons.empty();
  });
  s.valid = s.valid_enough_iterations && s.valid_cv && s.valid_drift && s.valid_replicas_in_sync &&
            trusted;
  return s;
}

}  // namespace scalebench
