// The profiled steps of a built-in cell (setting `profile_steps`; Note [Operator profiles] in
// common/cell/op_profile.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "common/cell/op_profile.h"
#include "worker/workload.h"

namespace scalebench {

/// What the profiled steps gave: the rank's operator table and the steps' own times.
struct ProfiledSteps {
  OpProfile profile;
  /// Per profiled step, the workload's whole-iteration phase (`step`, `batch`) as its timer
  /// measures it (on a GPU: CUDA events, like `timings`): the profiler's cost per step is
  /// their median against the summary's median_s.
  std::vector<double> step_s;
};

/// Runs `steps` iterations of `workload` under LibTorch's Kineto profiler (CPU operators with
/// their CPU memory; on a CUDA device also the kernels), each phase of the workload inside a
/// user scope `scalebench.phase/<name>`, and reduces the events with summarize_profile.
/// Iteration k runs the measured iteration `warmup_iterations() + k % measured_run` again
/// (`measured_run` > 0: the measured iterations the loop ran), so an inference rank reads
/// batches of its own shard. Called after every figure of the cell was taken (metrics,
/// peak memory, validation): what the steps change in the workload (its parameters, its
/// checksums) is never stored. Collective like an iteration (training ranks must all call
/// it with the same `steps`). Throws what the workload or the profiler throws; the profiler
/// is disabled on every way out.
ProfiledSteps run_profiled_steps(Workload& workload, const torch::Device& device, int64_t steps,
                                 int64_t measured_run);

}  // namespace scalebench
