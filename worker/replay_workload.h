// A replayed training step (`model: {replay: path}`): per-layer waits in place of compute,
// real gradient buckets reduced on the cell's backend. See Note [Replay workload] in
// common/cell/replay_table.h and docs/replay.md.
//
// Phases per iteration are the training ones (data, h2d, forward, backward, comm_wait,
// optimizer, step), so every analysis of a training cell reads a replay cell alike: backward
// holds the replayed waits and the bucket launches, comm_wait the wait for the allreduces.
#pragma once

#include <mpi.h>
#include <torch/torch.h>

#include <memory>

#include "common/cell/messages.h"
#include "worker/workload.h"

namespace scalebench {

/// Reads the layer table `assignment.cell.model.replay` (relative to `assignment.tree`) and
/// allocates the buckets' buffers (float32 or bfloat16 by the table's element size, on the
/// CPU). `group` must outlive the workload. Throws CellError(kInputs) for an unreadable or
/// invalid table and CellError(kDevice) for a device other than the CPU (the waits are host
/// sleeps, which a GPU's event timers do not see).
std::unique_ptr<Workload> make_replay_workload(const Assignment& assignment,
                                               const torch::Device& device, MPI_Comm group);

}  // namespace scalebench
