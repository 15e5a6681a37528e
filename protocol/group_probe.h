// One probe of a batch search, agreed by a group (Note [Group probes] in worker/batch_probe.h):
// every rank's local view, reduced with MPI_Allreduce to the worst status, the slowest times
// and the largest peak. Shared by the built-in workloads (worker/batch_probe.cc) and program
// cells (protocol/program_cell.cc). Torch-free.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/cell/batch_search.h"

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

}  // namespace scalebench
