#include "program/program_outcome.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <limits>
#include <optional>

#include "common/base/process_memory.h"
#include "common/cell/program.h"
#include "protocol/mpi_check.h"
#include "protocol/wire.h"

namespace scalebench::program {

/// What ended this rank's program, in the order of Note [Program cells]'s failures table
/// (docs/programs.md#failures).
LocalOutcome outcome_of(const ProgramRun& run, const std::vector<std::string>& argv,
                        const TorchrunLayout& layout, double timeout_s, double budget_bytes) {
  const std::string ran = "program " + quote_argv(argv);
  const std::string tail = output_tail(run);
  const ProgramReport& report = run.report;
  if (!run.record_error.empty()) {
    return {CellStatus::kFailed, FailurePhase::kLoop, run.record_error + "; " + ran, true};
  }
  if (run.peer_failed) {
    return {CellStatus::kFailed, FailurePhase::kGroup,
            "another rank's program failed; this rank's was ended", false};
  }
  const double peak = measured_peak_bytes(run);
  if (run.over_budget || (budget_bytes > 0 && peak > budget_bytes)) {
    LocalOutcome over{CellStatus::kOom, FailurePhase::kLoop,
                      ran + (run.over_budget ? " was ended: its" : ": its") + " memory reached " +
                          std::to_string(std::lround(peak / kMiB)) +
                          " MiB, over the memory budget of " +
                          std::to_string(std::lround(budget_bytes / kMiB)) +
                          " MiB (memory_limit_mb, docs/programs.md#memory); lower the batch "
                          "size or raise memory_limit_mb",
                      true};
    over.over_budget = true;
    return over;
  }
  if (run.exit.timed_out) {
    return {CellStatus::kTimeout, FailurePhase::kLoop,
            ran + " ran past timeout_s = " + std::to_string(timeout_s) +
                " s and was ended; output:\n" + tail,
            true};
  }
  if (!run.exit.ok() || report.error_kind) {
    // An outside SIGKILL is the kernel's OOM killer; ours come only after a stop or timeout.
    const bool oom = report.error_kind == std::optional<std::string>("oom") ||
                     (run.exit.term_signal == SIGKILL && !run.exit.stopped && !run.exit.timed_out);
    const std::string why = report.error_kind ? report.error_message : run.exit.describe();
    return {oom ? CellStatus::kOom : CellStatus::kFailed, FailurePhase::kLoop,
            ran + " failed (" + run.exit.describe() + "): " + why + "; output:\n" + tail, true};
  }
  if (report.hello &&
      (report.hello_rank != layout.rank || report.hello_world_size != layout.world)) {
    return {CellStatus::kFailed, FailurePhase::kSetup,
            ran + " saw rank " + std::to_string(report.hello_rank) + " of " +
                std::to_string(report.hello_world_size) + ", scalebench assigned rank " +
                std::to_string(layout.rank) + " of " + std::to_string(layout.world) +
                " (does it read RANK and WORLD_SIZE?)",
            true};
  }
  return {};
}

/// Note [Program cells]: every rank whose own program failed tells the others; returns how
/// many did, after receiving exactly the stops meant for this rank (none outlives the cell).
int exchange_stops(bool sends_stop, MPI_Comm group, const TorchrunLayout& layout) {
  std::vector<MPI_Request> sends;
  if (sends_stop) {
    sends.reserve(static_cast<size_t>(layout.world));
    for (int r = 0; r < layout.world; ++r) {
      if (r == layout.rank) continue;
      sends.emplace_back();
      MPI_CHECK(MPI_Isend(nullptr, 0, MPI_BYTE, r, static_cast<int>(Tag::kProgramStop), group,
                          &sends.back()));
    }
  }
  int senders = sends_stop ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &senders, 1, MPI_INT, MPI_SUM, group));
  for (int k = 0; k < senders - (sends_stop ? 1 : 0); ++k) {
    MPI_CHECK(MPI_Recv(nullptr, 0, MPI_BYTE, MPI_ANY_SOURCE, static_cast<int>(Tag::kProgramStop),
                       group, MPI_STATUS_IGNORE));
  }
  if (!sends.empty()) {
    MPI_CHECK(MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE));
  }
  return senders;
}

/// The rank's timings, metrics and effective values from what its program reported.
void record_report(RankResult& result, const ProgramRun& run, const CellSpec& cell,
                   double origin_s) {
  const ProgramReport& report = run.report;
  const auto timings = program_timings(report, cell.mode == Mode::kTrain ? "step" : "batch",
                                       origin_s, run.exit.wall_s);
  result.phases = timings.phases;
  result.timings_s = timings.timings_s;
  result.phase_starts_s = timings.phase_starts_s;
  result.warmup_iterations = timings.warmup_iterations;
  result.metrics["loop_wall_s"] = run.exit.wall_s;
  result.metrics["program_exit_status"] = run.exit.shell_status();
  const auto measured = static_cast<double>(result.iterations() - timings.warmup_iterations);
  result.metrics["measured_iterations"] = measured;
  if (report.steps.empty()) {
    result.metrics["no_iteration_timings"] = 1.0;
  } else {  // the program's own start-up: interpreter, imports, model, data, until step 0
    result.metrics["program_startup_s"] = report.steps.front().begin - origin_s;
    // Note [Run-level segments]: the steps' span, and what followed the last step.
    result.metrics["program_steps_span_s"] = report.steps.back().end - report.steps.front().begin;
    result.metrics["program_after_steps_s"] =
        std::max(0.0, run.launch_s + run.exit.wall_s - report.steps.back().end);
  }
  double first_segment_s = std::numeric_limits<double>::infinity();
  for (const auto& [name, segment] : report.segments) {
    result.metrics["segment_" + name + "_s"] = segment.total_s;
    result.metrics["segment_" + name + "_count"] = static_cast<double>(segment.count);
    first_segment_s = std::min(first_segment_s, segment.first_begin_s);
  }
  if (!report.segments.empty()) {
    result.metrics["program_before_segments_s"] = std::max(0.0, first_segment_s - origin_s);
  }
  if (cell.mode == Mode::kInfer) {
    result.metrics["samples"] = measured * static_cast<double>(cell.batch_size);
  }
  if (report.peak_memory_bytes >= 0) {
    result.metrics[report.memory_kind == "cuda" ? "peak_allocated_bytes" : "peak_rss_bytes"] =
        report.peak_memory_bytes;
  }
  for (const auto& [name, value] : report.metrics) {
    result.metrics[name == "loss" ? "final_loss" : "program_" + name] = value;
  }
  // Note [Program supervisor]: what owned the program's processes, and how many it left behind
  // (named in its output tail, ended with the cell).
  if (!run.exit.containment.empty()) {
    result.effective["program_containment"] = run.exit.containment;
    result.metrics["program_leftover_processes"] = static_cast<double>(run.exit.leftovers.size());
  }
  result.effective["program_framework"] = report.framework.empty() ? "none" : report.framework;
  if (const auto client = report.versions.find("client"); client != report.versions.end()) {
    result.effective["program_client"] = client->second;
  }
}

}  // namespace scalebench::program
