#include "program/program_batch_search.h"

#include <algorithm>

#include "common/base/logging.h"
#include "common/base/process_memory.h"
#include "common/cell/stats.h"
#include "program/program_attempt.h"
#include "protocol/group_batch_search.h"
#include "protocol/group_probe.h"

namespace scalebench::program {

// Note [Program memory budget]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A program cell has a memory budget when `memory_limit_mb` is set, and a CPU cell with
// `batch_size: auto` also without it (the node's MemAvailable shared by its workers, taken
// once before the first probe, as for built-in cells). The budget binds for real:
//  * CPU: while the program runs the worker sums the resident sets of its process group
//    (every process it started, data-loader workers included) every 200 ms (it reads
//    /proc/<pid>/stat of every process of the node: about 10 us a process, so a few
//    milliseconds a second on a busy node); above the budget the group is ended (SIGTERM,
//    then SIGKILL) and the rank records `oom` ("over the memory budget"). The program's
//    own report of its peak resident set (`sb.memory()`: VmHWM, exact but of the main
//    process only) above the budget counts too, so an allocation shorter than the period
//    is not missed.
//  * GPU: the program receives SCALEBENCH_MEMORY_BUDGET_BYTES, and the client caps torch's
//    CUDA allocator at that share of the device (`set_per_process_memory_fraction`), so an
//    allocation beyond it raises torch.OutOfMemoryError; a reported CUDA peak above the
//    budget counts too.
// A batch search (`batch_size: auto`) is the search of built-in cells (one loop, one
// refinement, one time rule: protocol/group_batch_search.h) whose probe relaunches the program
// at the probe's batch (one warm-up and `probe_iterations` measured steps) under the same budget;
// the group agrees on each probe (Note [Group probes], protocol/group_probe.h): an `oom` record or
// a kill by the kernel marks `oom`, the budget `over_budget`. So the boundary it finds is the
// boundary of direct runs of the same program with the same budget.

namespace {

/// A probe's view on this rank (Note [Group probes]): its status and measured step times.
LocalProbe local_probe(const Attempt& attempt, const CellSpec& probe_cell) {
  LocalProbe probe;
  probe.peak_bytes = std::max(0.0, measured_peak_bytes(attempt.run));
  const LocalOutcome& local = attempt.local;
  if (local.over_budget) {
    probe.status = ProbeStatus::kOverBudget;
  } else if (local.status == CellStatus::kOom) {
    probe.status = ProbeStatus::kOom;
  } else if (local.status == CellStatus::kTimeout) {
    probe.timed_out = true;
  } else if (local.status != CellStatus::kOk && local.phase != FailurePhase::kGroup) {
    probe.failure = local.reason;
  }
  if (local.status != CellStatus::kOk) return probe;  // a rank ended by another: no times
  const std::string step = probe_cell.mode == Mode::kTrain ? "step" : "batch";
  const auto timings = program_timings(attempt.run.report, step, 0, attempt.run.exit.wall_s);
  const auto column = static_cast<size_t>(
      std::find(timings.phases.begin(), timings.phases.end(), step) - timings.phases.begin());
  const size_t rows = timings.phases.empty() ? 0 : timings.timings_s.size() / timings.phases.size();
  for (size_t row = static_cast<size_t>(timings.warmup_iterations); row < rows; ++row) {
    probe.times_s.push_back(timings.timings_s[row * timings.phases.size() + column]);
  }
  const Summary summary = summarize(probe.times_s);
  probe.median_s = summary.median;
  probe.p99_s = summary.p99;
  return probe;
}

}  // namespace

/// The budget of Note [Program memory budget], bytes (0: none).
double program_budget_bytes(const CellSpec& cell, const std::string& device,
                            const WorkerContext& context) {
  if (cell.memory_limit_mb > 0) return cell.memory_limit_mb * kMiB;
  if (cell.batch_size != kBatchAuto || device != "cpu") return 0;
  return available_memory_share_bytes(context.local_workers);
}

/// Note [Program memory budget]: the batch search of a program cell, the loop of
/// protocol/group_batch_search.h with a relaunch of the program as its probe. Returns the
/// chosen batch, or 0 with `result` failed (status, phase batch_search, reason). Collective.
int64_t search_program_batch(const Assignment& assignment, const TorchrunLayout& layout,
                             const WorkerContext& context, const std::string& device,
                             const std::filesystem::path& output_dir, double budget_bytes,
                             std::chrono::steady_clock::time_point deadline, MPI_Comm group,
                             RankResult& result) {
  const CellSpec& cell = assignment.cell;
  const ProbeOneBatch probe_batch = [&](int64_t batch,
                                        std::chrono::steady_clock::time_point probe_deadline) {
    Assignment probe = assignment;
    probe.cell = probe_cell(cell, batch, cell.probe_iterations);
    const double left = std::max(
        0.0,
        std::chrono::duration<double>(probe_deadline - std::chrono::steady_clock::now()).count());
    const Attempt attempt =
        attempt_program(probe, layout, context, device, output_dir, budget_bytes, left, group);
    return GroupProbeRun{reduce_probe(local_probe(attempt, probe.cell), batch, layout.world, group),
                         attempt.local.reason};
  };
  const GroupSearchResult search =
      search_group_batch(cell, budget_bytes, probe_batch, deadline, group);
  record_search(search, budget_bytes, result);
  if (search.failed) {
    result.status = search.status;
    result.failed_phase = FailurePhase::kBatchSearch;
    result.reason = search.reason;
    return 0;
  }
  return search.choice.figures.recommended_batch;
}

}  // namespace scalebench::program
