// The LibTorch CellRunner: runs one rank's share of a cell and never throws for a
// failure inside it.
//
// Per cell: device selection (cuda:<local_index> when the cell allows CUDA and a GPU is
// there, cpu otherwise; device cuda without a GPU fails the cell), CPU threads, TF32,
// seeds, peak-memory reset, the workload (train or infer), the group agreement and the
// timed loop. See Note [Group agreement].
#pragma once

#include <memory>

#include "protocol/cell_runner.h"

namespace scalebench {

// Note [Group agreement]
// ~~~~~~~~~~~~~~~~~~~~~~
// Before any collective of a cell (NCCL setup, parameter broadcast, the loop's barrier)
// every rank of the group takes part in an MPI_Allreduce of its status over the group
// communicator: when one rank failed to build its model or data, all ranks stop there and
// report (a rank that did not fail itself reports status failed, phase "group", naming
// the group rank that failed). After the loop a second allreduce tells every rank the
// group's worst status the same way. A rank failing *inside* the loop of a lockstep
// (training) cell leaves its peers in the next gradient allreduce: that cannot be
// recovered here and is covered by the orchestrator's cell timeout.

/// A CellRunner for zoo models on CPU or CUDA. Not thread safe: one per worker process.
std::unique_ptr<CellRunner> make_torch_cell_runner();

}  // namespace scalebench
