// Sharded inference of a zoo or TorchScript model on synthetic or HDF5 data.
//
// `samples` items (0 = batch_size * world_size * measured_iterations) are split across the
// group in contiguous shards (shard_range); each rank runs its shard in batches of
// batch_size (the last one may be smaller), model in eval mode under NoGradGuard.
// Phases per batch: load, h2d, forward, d2h, batch. Warm-up batches come first, on extra
// samples past the dataset (indices samples + (rank * warmup + w) * batch_size ...), and
// are not part of the shard.
#pragma once

#include <mpi.h>
#include <torch/torch.h>

#include <memory>
#include <string>

#include "common/cell/cell_spec.h"
#include "common/cell/messages.h"
#include "worker/workload.h"

namespace scalebench {

/// Local work only (no collective). `group` gives this rank's shard. The model comes from
/// the zoo or `assignment.artifact`; a checkpoint and HDF5 data are read from paths
/// relative to `assignment.tree` (checkpoint load time: metric checkpoint_load_s).
std::unique_ptr<Workload> make_infer_workload(const Assignment& assignment,
                                              const torch::Device& device, MPI_Comm group);

/// Number of items of an inference cell (resolves samples == 0).
int64_t inference_samples(const CellSpec& cell);

}  // namespace scalebench
