// DDP-style data-parallel training of a zoo or TorchScript model on synthetic or HDF5 data.
//
// Phases per iteration (see docs/metrics.md): data, h2d, forward, backward, comm_wait,
// optimizer, step. With world_size 1 there is no gradient reducer (comm_wait is an empty
// interval): the single-rank baseline is plain training, without DDP's bucketing cost.
#pragma once

#include <mpi.h>
#include <torch/torch.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/cell/cell_spec.h"
#include "common/cell/messages.h"
#include "worker/workload.h"

namespace scalebench {

/// The phases of a training step, as indices of the phase timer: the built-in training's
/// and the replay workload's (worker/replay_workload.h), which records the same ones.
struct TrainPhase {
  enum Index : size_t { kData, kH2d, kForward, kBackward, kCommWait, kOptimizer, kStep };
};

/// The names of TrainPhase's phases, in its order.
const std::vector<std::string>& train_phases();

/// Builds the model of `assignment.cell` (zoo: seeded with cell.seed; TorchScript: loaded
/// from `assignment.artifact`; on the CPU, then moved to `device`), the optimizer and the
/// batch source (HDF5 paths relative to `assignment.tree`). Local work only: the communicator and
/// the parameter broadcast happen in connect(). `group` must outlive the workload. Throws CellError
/// / InputError for unusable cells (bad optimizer, fp16 on CPU, ...).
std::unique_ptr<Workload> make_train_workload(const Assignment& assignment,
                                              const torch::Device& device, MPI_Comm group);

/// `cell.backend` resolved for `device`: auto -> nccl on CUDA, mpi on CPU. Throws
/// CellError(FailurePhase::kConnect) for nccl on a CPU device or nccl in a build without CUDA.
Backend resolve_backend(Backend requested, const torch::Device& device);

/// The optimizer of `spec` over `parameters`; throws InputError for an unknown name.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerSpec& spec,
                                                        std::vector<torch::Tensor> parameters);

}  // namespace scalebench
