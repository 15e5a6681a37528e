// The per-cell `summary` of the results file, computed from the ranks' raw timings.
// Exactly the definitions of schemas/results-layout.md, section `summary`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/cell/batch_search.h"
#include "common/cell/cell_spec.h"
#include "common/cell/messages.h"
#include "common/cell/stats.h"

namespace scalebench {

// The validity thresholds: defined here and nowhere else. The results file stores them
// with every summary (`min_valid_iterations`, `max_valid_cv`,
// `replica_checksum_rel_tolerance`), and the analysis package reads them from there.

/// Minimum number of summarised samples (`count`) for `valid_enough_iterations`.
inline constexpr size_t kMinValidIterations = 5;
/// Largest coefficient of variation (`cv`, a fraction) for `valid_cv`.
inline constexpr double kMaxValidCv = 0.10;
/// Largest |warm-up drift| (median of the first half of the measured iterations over that
/// of the second half, minus 1) for `valid_drift`: beyond it the cell was still warming up.
inline constexpr double kMaxValidDrift = 0.10;
/// Relative tolerance for `valid_replicas_in_sync` on `param_checksum`.
inline constexpr double kReplicaChecksumRelTolerance = 1e-6;

/// The thresholds a summary's validity flags were judged by (stored next to the flags).
struct ValidityThresholds {
  size_t min_iterations = kMinValidIterations;
  double max_cv = kMaxValidCv;
  double max_drift = kMaxValidDrift;
  double replica_checksum_rel_tolerance = kReplicaChecksumRelTolerance;
};

/// Values of the `/cells/<id>/summary` attributes. Times in seconds, memory in bytes;
/// NaN where a value cannot be computed (no measured iteration, no memory metric).
struct CellSummary {
  std::string metric;  ///< summarised phase: "step" (train) or "batch" (inference)
  /// The per-rank batch the timed loop ran: the spec's, or for batch_size auto the one the
  /// search chose (the ranks' `batch_size` metric; 0 when the search found none).
  int64_t batch_size = 0;
  /// batch_size auto only (Note [Batch search]): the figures of the group's probes, and the
  /// memory budget they were judged by (the ranks' `memory_budget_bytes`, smallest).
  std::optional<BatchFigures> batch_figures;
  double memory_budget_bytes = 0.0;
  Summary time;  ///< statistics of the per-iteration time; see the layout doc
  /// The 95 % distribution-free interval of time.median (Note [Iterations auto]); NaN
  /// below 2 samples.
  double median_ci_low_s = 0.0;
  double median_ci_high_s = 0.0;
  /// Note [Iterations auto]: the group's stop_reason / warmup_reason (the first rank that
  /// has one); "" when none ran a loop.
  std::string stop_reason;
  std::string warmup_reason;
  double throughput_samples_per_s = 0.0;
  double samples_per_s_per_worker = 0.0;
  std::map<std::string, double> phase_median_s;  ///< per phase name
  double peak_memory_bytes = 0.0;
  /// Training: mean over ranks of `final_loss` (each rank's loss on its own shard of the
  /// last step), i.e. the loss of the global batch; NaN for inference or a missing value.
  double final_loss_mean = 0.0;
  /// Note [CPU oversubscription]: max over ranks of node_workers x (cpu_threads +
  /// mpi_comm_threads) / node_cores; above 1 the node runs more busy threads than cores.
  /// NaN when a rank did not report those metrics.
  double cpu_threads_per_core = 0.0;
  /// Note [GPU energy] (worker/gpu_power.h): sum over ranks of `gpu_energy_j` over the timed
  /// loop, and the loop's samples divided by it; NaN unless every rank measured its GPU.
  double energy_j = 0.0;
  double samples_per_joule = 0.0;
  bool valid_enough_iterations = false;
  bool valid_cv = false;
  /// The warm-up drift of the per-iteration series (train: slowest rank; inference: rank
  /// mean): median(first half) / median(second half) - 1, NaN below 4 iterations; the one
  /// definition the analysis's trust table reads (tables/quality.py).
  double drift = 0.0;
  bool valid_drift = false;  ///< |drift| <= max_drift (1 when drift is NaN)
  bool valid_replicas_in_sync = false;
  bool valid = false;
  ValidityThresholds thresholds;  ///< what the `valid_*` flags above were judged by
};

/// Summary of one cell. `ranks` are the group's results in group-rank order; rows below a
/// rank's `warmup_iterations` are excluded. Ranks may have different phase lists (matched
/// by name) and row counts (inference). Pure; never throws for odd data: missing values
/// yield NaN and invalid flags.
///
/// Train: one iteration's time is the slowest rank's `step` in that iteration;
/// throughput = batch_size * world_size / median. Inference: all ranks' measured `batch`
/// times are summarised; throughput = samples / max over ranks of the sum of that rank's
/// measured batch times, where samples is the sum of the ranks' `samples` metric when
/// every rank reports one, else cell.samples, else batch_size * world_size *
/// measured_iterations.
CellSummary summarize_cell(const CellSpec& spec, const std::vector<RankResult>& ranks);

}  // namespace scalebench
