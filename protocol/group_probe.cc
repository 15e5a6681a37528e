#include "protocol/group_probe.h"

#include <algorithm>
#include <array>

#include "protocol/mpi_check.h"

namespace scalebench {

GroupOutcome reduce_probe(const LocalProbe& local, int64_t batch, int world, MPI_Comm group) {
  std::array<int, 3> mine{static_cast<int>(local.status), local.failure.empty() ? 0 : 1,
                          local.timed_out ? 1 : 0};
  std::array<int, 3> worst{};
  MPI_CHECK(MPI_Allreduce(mine.data(), worst.data(), 3, MPI_INT, MPI_MAX, group));
  std::array<double, 3> values{local.median_s, local.p99_s, local.peak_bytes};
  std::array<double, 3> largest{};
  MPI_CHECK(MPI_Allreduce(values.data(), largest.data(), 3, MPI_DOUBLE, MPI_MAX, group));
  GroupOutcome out;
  out.probe.batch = batch;
  out.probe.status = static_cast<ProbeStatus>(worst[0]);
  out.failed = worst[1] != 0;
  out.timed_out = worst[2] != 0;
  out.probe.median_s = largest[0];
  out.probe.p99_s = largest[1];
  out.probe.peak_memory_bytes = largest[2];
  // Per iteration, the slowest rank; the ranks agree on a count first (a rank that failed
  // has none), so every rank passes the same length to the reduction.
  const int mine_count = static_cast<int>(local.times_s.size());
  int count = 0;
  MPI_CHECK(MPI_Allreduce(&mine_count, &count, 1, MPI_INT, MPI_MIN, group));
  if (count > 0) {
    std::vector<double> times(local.times_s.begin(), local.times_s.begin() + count);
    out.probe.times_s.resize(static_cast<size_t>(count));
    MPI_CHECK(
        MPI_Allreduce(times.data(), out.probe.times_s.data(), count, MPI_DOUBLE, MPI_MAX, group));
  }
  const bool fits = out.probe.status == ProbeStatus::kOk && !out.failed && !out.timed_out;
  // Training: the global batch per step; inference: every rank's batch per batch time.
  out.probe.throughput =
      fits && out.probe.median_s > 0 ? static_cast<double>(batch) * world / out.probe.median_s : 0;
  return out;
}

CellSpec probe_cell(const CellSpec& cell, int64_t batch, int64_t iterations) {
  CellSpec probe = cell;
  probe.batch_size = batch;
  probe.warmup_iterations = iterations > 0 ? 1 : 0;
  probe.measured_iterations = static_cast<int>(std::max<int64_t>(iterations, 1));
  probe.samples = 0;
  probe.validate = false;
  probe.profile_steps = 0;  // a probe is timed, never profiled
  return probe;
}

GroupChoice choose_batch(const std::vector<BatchProbe>& probes, const CellSpec& cell,
                         double budget_bytes, MPI_Comm group) {
  GroupChoice choice;
  MPI_CHECK(MPI_Allreduce(&budget_bytes, &choice.budget_bytes, 1, MPI_DOUBLE, MPI_MIN, group));
  choice.figures = batch_figures(probes, {.safety_margin = cell.safety_margin,
                                          .latency_slo_s = cell.latency_slo_ms / 1000.0,
                                          .memory_budget_bytes = choice.budget_bytes});
  return choice;
}

std::string probe_failed_reason(int64_t batch, const std::string& detail) {
  return "the probe of batch " + std::to_string(batch) + " failed on a rank" +
         (detail.empty() ? "" : ": " + detail);
}

std::string search_timeout_reason(int64_t batch, size_t probes_done) {
  return "timeout_s passed during the batch search, in the probe of batch " +
         std::to_string(batch) + " (" + std::to_string(probes_done) +
         " probes done); raise timeout_s or lower max_batch";
}

std::string nothing_fits_reason(const CellSpec& cell, const BatchProbe& first,
                                double budget_bytes) {
  const auto mib = [](double bytes) {
    return std::to_string(static_cast<int64_t>(bytes / (1 << 20)));
  };
  return "batch_size auto: not even min_batch " + std::to_string(cell.min_batch) + " fits (" +
         to_string(first.status) + ", peak " + mib(first.peak_memory_bytes) + " MiB, budget " +
         mib(budget_bytes) + " MiB); lower min_batch or raise memory_limit_mb";
}

}  // namespace scalebench
