// Sharded inference of a zoo model on synthetic data.
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

#include "common/cell_spec.h"
#include "worker/workload.h"

namespace scalebench {

/// Local work only (no collective). `group` gives this rank's shard.
std::unique_ptr<Workload> make_infer_workload(const CellSpec& cell, const torch::Device& device,
                                              MPI_Comm group);

/// Number of items of an inference cell (resolves samples == 0).
int64_t inference_samples(const CellSpec& cell);

/// Loads a checkpoint into `module`: a file written by torch.save(dict(model.state_dict()))
/// in Python or torch::pickle_save of a name -> tensor dict in C++, whose names and shapes
/// match the module's parameters and buffers exactly. Throws CellError("checkpoint_load")
/// naming the first missing, unexpected or mis-shaped entry.
void load_state_dict(torch::nn::Module& module, const std::string& path);

}  // namespace scalebench
