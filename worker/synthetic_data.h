// Seeded synthetic batches made on the host, from a pool of samples drawn once.
//
// See Note [Synthetic samples]. A batch is produced on the CPU (in pinned memory when
// `pin_memory`, so the workloads' host-to-device copy can be non_blocking) and is the
// `data` / `load` phase of the workloads; copying it to the device is their `h2d` phase.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "worker/batch_source.h"
#include "worker/model_zoo.h"

namespace scalebench {

// Note [Synthetic samples]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Sample number `i` (its global index in the cell's sample stream) is the pool's sample
// j = i mod pool_samples(), filled once from a CPU generator seeded with sample_seed(seed, j),
// and from nothing else. So a sample is the same bytes whichever rank, batch position or
// batch size makes it: a sharded inference over N ranks sees exactly the inputs one process
// sees, and training batches depend only on (seed, rank, iteration) through
// train_first_sample(); the pool's size depends only on the sample's shape and dtype.
//
// Why a pool: drawing every sample afresh costs one normal_ per element on the host. On an
// H200 that was the step: ResNet-50 bf16 at batch 1024 spent 0.80 s of its 1.10 s step in
// `data` (930 samples/s, MFU 2 %), measuring the generator instead of the model. The pool
// draws each of its samples once (when first used, so a short cell costs what it did) and
// then copies rows, as a real input pipeline's cache or a fixed synthetic batch would; the
// copy runs on the intra-op threads. The stream repeats every pool_samples() samples,
// which only timing and same-stream comparisons (validation, DDP) see, never a user's data.

/// Samples in the pool of samples of `sample_bytes` (inputs and targets): 512 MiB worth,
/// at least 256 and at most 65536 (ResNet-50 at 224 x 224 fp32: 891).
int64_t pool_samples(int64_t sample_bytes);

/// splitmix64 of `seed` and `index`: the seed of one sample's generator.
uint64_t sample_seed(uint64_t seed, int64_t index);

/// First global sample index of `rank`'s batch in training iteration `iteration`
/// (iterations count warm-up ones from 0): ((iteration * world) + rank) * batch.
int64_t train_first_sample(int64_t iteration, int rank, int world_size, int64_t batch_size);

/// Rank `rank`'s shard of `samples` items: contiguous, the first samples % world ranks get
/// one item more (counts differ by at most one; a rank may get none).
SampleRange shard_range(int64_t samples, int rank, int world_size);

/// Makes batches of one model's synthetic samples. Not thread safe (one per workload).
class SyntheticData : public BatchSource {
 public:
  /// Targets as `targets` says (Note [Targets]); TargetSpec::used is ignored (inference
  /// batches keep their class ids).
  SyntheticData(const ModelInfo& model, std::vector<int64_t> input_shape, TargetSpec targets,
                uint64_t seed, bool pin_memory);
  /// Class-id targets in [0, num_classes) of the zoo's rule (target_shape).
  SyntheticData(const ModelInfo& model, const std::vector<int64_t>& input_shape,
                int64_t num_classes, uint64_t seed, bool pin_memory);
  /// See BatchSource::make_batch; sample i is the same bytes whichever batch makes it.
  [[nodiscard]] HostBatch make_batch(SampleRange range) const override;
  /// The period of the sample stream (Note [Synthetic samples]).
  [[nodiscard]] int64_t pool_size() const { return pool_size_; }

 private:
  /// Draws the pool's samples `slots` that are not drawn yet (in parallel).
  void fill(const std::vector<int64_t>& slots) const;
  /// float32 values (Note [Targets]) or int64 class ids.
  [[nodiscard]] torch::ScalarType target_dtype() const {
    return targets_.is_float() ? torch::kFloat32 : torch::kInt64;
  }

  const ModelInfo& model_;
  std::vector<int64_t> input_shape_;
  TargetSpec targets_;
  std::vector<int64_t> target_shape_;
  uint64_t seed_;
  bool pin_memory_;
  int64_t pool_size_;
  // The pool, allocated at the first batch outside c10's allocator (a CPU memory budget
  // does not count it; its pages are touched only as samples are drawn); `drawn_[j]` says
  // whether sample j is. Mutable: a cache behind a const batch.
  mutable torch::Tensor pool_inputs_;
  mutable torch::Tensor pool_targets_;
  mutable std::vector<bool> drawn_;
};

}  // namespace scalebench
