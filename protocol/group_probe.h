// One probe of a batch search, agreed by a group (Note [Group probes] in worker/batch_probe.h):
// every rank's local view, reduced with MPI_Allreduce to the worst status, the slowest times
// and the largest peak. Shared by the built-in workloads (worker/batch_probe.cc) and program
// cells (program/program_cell.cc). Torch-free.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/cell/batch_search.h"
#include "common/cell/cell_spec.h"

namespace scalebench {

/// One rank's view of a probe, before the group's reduction.
struct LocalProbe {
  ProbeStatus status = ProbeStatus::kOk;
  double median_s = 0;
  double p99_s = 0;
  double peak_bytes = 0;
  bool timed_out = false;
  std::string failure;          ///< a failure other than running out of memory ("" when none)
  std::vector<double> times_s;  ///< each measured iteration's step/batch time
};

/// The group's outcome of a probe: worst status (a failure counts as worst), slowest times,
/// largest peak; throughput = batch x world / median when it fits.
struct GroupOutcome {
  BatchProbe probe;
  bool failed = false;     ///< some rank's probe failed for a reason other than memory
  bool timed_out = false;  ///< some rank's probe ran out of time
};

/// Collective over `group`: every rank calls it once per probe with its own view.
GroupOutcome reduce_probe(const LocalProbe& local, int64_t batch, int world, MPI_Comm group);

/// The cell a probe runs: batch `batch`, one warm-up and `iterations` measured (0: one step,
/// no warm-up), no validation; inference sizes its dataset from the batch (samples 0).
CellSpec probe_cell(const CellSpec& cell, int64_t batch, int64_t iterations);

/// The search's choice once its probes are done: the figures of Note [Batch search] judged by
/// the group's smallest budget (the one every rank's recommended batch must respect), and
/// that budget. Collective over `group`.
struct GroupChoice {
  BatchFigures figures;
  double budget_bytes = 0;
};
GroupChoice choose_batch(const std::vector<BatchProbe>& probes, const CellSpec& cell,
                         double budget_bytes, MPI_Comm group);

/// Why a search ended early: a probe failed on a rank for a reason other than memory
/// (`detail`: that rank's reason, "" when another rank failed), timeout_s passed in the
/// probe of `batch` after `probes_done` probes, or not even min_batch fit (`first`: the first
/// probe, `budget_bytes`: GroupChoice's).
std::string probe_failed_reason(int64_t batch, const std::string& detail);
std::string search_timeout_reason(int64_t batch, size_t probes_done);
std::string nothing_fits_reason(const CellSpec& cell, const BatchProbe& first, double budget_bytes);

}  // namespace scalebench
