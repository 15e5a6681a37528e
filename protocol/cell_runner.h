// The seam between the worker rank's loop and the benchmarks.
//
// The protocol layer holds no Torch code: a worker rank's loop (protocol/worker_loop.h)
// receives an Assignment, makes the cell's group communicator and hands both to a
// CellRunner.
// worker/ provides the LibTorch implementation (make_torch_cell_runner); tests provide a
// fake one, so the protocol is tested without models or GPUs.
#pragma once

#include <mpi.h>

#include <string>

#include "common/cell/messages.h"

namespace scalebench {

/// Where a worker rank runs. Filled by the worker loop before the first cell.
struct WorkerContext {
  int world_rank = -1;
  std::string host;
  int local_index = 0;    ///< index among this node's worker ranks (selects the GPU)
  int local_workers = 1;  ///< number of worker ranks on this node
  int node_cores = 1;     ///< CPU cores of this node (std::thread::hardware_concurrency)
  /// Note [Worker deadline] (protocol/worker_loop.h): seconds past a cell's timeout_s after
  /// which this rank ends itself, whether or not rank 0 can be reached (0: never).
  double overrun_limit_s = 0;
};

class CellRunner {
 public:
  virtual ~CellRunner() = default;

  /// The device this worker uses ("cpu" or the GPU's name), reported in WorkerHello.
  virtual std::string device_name(const WorkerContext& context) = 0;

  /// Runs this rank's share of `assignment.cell` on the group communicator `group`
  /// (size == cell.world_size, rank == position in assignment.members).
  ///
  /// Contract: never throws for a failure inside the cell: it returns a RankResult whose
  /// status is failed / oom / timeout with failed_phase and reason. It may throw
  /// FatalError when the group is unusable (e.g. a collective failed), which ends the job.
  /// Every rank of the group returns (no rank may leave a collective unmatched): a rank
  /// that failed alone still takes part in the group's agreement on the outcome.
  virtual RankResult run(const Assignment& assignment, MPI_Comm group,
                         const WorkerContext& context) = 0;
};

}  // namespace scalebench
