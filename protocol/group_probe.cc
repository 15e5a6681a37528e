#include "protocol/group_probe.h"

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

}  // namespace scalebench
