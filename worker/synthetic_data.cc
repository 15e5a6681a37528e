#include "worker/synthetic_data.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace scalebench {

uint64_t sample_seed(uint64_t seed, int64_t index) {
  // splitmix64 (Steele et al.) applied twice: mixes the seed, then the index into it.
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return mix(mix(seed) ^ static_cast<uint64_t>(index));
}

int64_t train_first_sample(int64_t iteration, int rank, int world_size, int64_t batch_size) {
  return (iteration * world_size + rank) * batch_size;
}

SampleRange shard_range(int64_t samples, int rank, int world_size) {
  const int64_t base = samples / world_size;
  const int64_t extra = samples % world_size;
  const int64_t first = rank * base + std::min<int64_t>(rank, extra);
  return {first, base + (rank < extra ? 1 : 0)};
}

int64_t pool_samples(int64_t sample_bytes) {
  constexpr int64_t kPoolBytes = int64_t{512} << 20;
  constexpr int64_t kMinSamples = 256;
  constexpr int64_t kMaxSamples = 65536;
  return std::clamp(kPoolBytes / std::max<int64_t>(sample_bytes, 1), kMinSamples, kMaxSamples);
}

namespace {

/// An uninitialised tensor [count, shape...] of `dtype` in memory of its own (malloc), not
/// from c10's CPU allocator: the pool is the data's cache, not memory the model allocates,
/// so Note [Counting CPU allocations] (a CPU cell's memory budget) never counts it. Its
/// pages are committed as samples are drawn.
torch::Tensor untracked_rows(int64_t count, const std::vector<int64_t>& shape,
                             torch::ScalarType dtype) {
  std::vector<int64_t> sizes = {count};
  sizes.insert(sizes.end(), shape.begin(), shape.end());
  const auto bytes = static_cast<size_t>(c10::multiply_integers(sizes)) * c10::elementSize(dtype);
  void* memory = std::malloc(std::max<size_t>(bytes, 1));
  if (memory == nullptr) {
    throw std::bad_alloc();
  }
  return torch::from_blob(
      memory, sizes, [](void* data) { std::free(data); }, torch::TensorOptions().dtype(dtype));
}

}  // namespace

SyntheticData::SyntheticData(const ModelInfo& model, std::vector<int64_t> input_shape,
                             TargetSpec targets, uint64_t seed, bool pin_memory)
    : model_(model),
      input_shape_(std::move(input_shape)),
      targets_(std::move(targets)),
      target_shape_(targets_.shape.value_or(target_shape(model, input_shape_))),
      seed_(seed),
      pin_memory_(pin_memory),
      pool_size_(pool_samples(c10::multiply_integers(input_shape_) *
                                  static_cast<int64_t>(c10::elementSize(model_.input_dtype)) +
                              c10::multiply_integers(target_shape_) *
                                  static_cast<int64_t>(c10::elementSize(target_dtype())))) {}

SyntheticData::SyntheticData(const ModelInfo& model, const std::vector<int64_t>& input_shape,
                             int64_t num_classes, uint64_t seed, bool pin_memory)
    : SyntheticData(
          model, input_shape,
          TargetSpec{.shape = target_shape(model, input_shape), .num_classes = num_classes}, seed,
          pin_memory) {}

void SyntheticData::fill(const std::vector<int64_t>& slots) const {
  const bool values = targets_.is_float();
  if (!pool_inputs_.defined()) {
    pool_inputs_ = untracked_rows(pool_size_, input_shape_, model_.input_dtype);
    pool_targets_ = untracked_rows(pool_size_, target_shape_, target_dtype());
    drawn_.assign(static_cast<size_t>(pool_size_), false);
  }
  std::vector<int64_t> missing;
  for (const int64_t slot : slots) {
    if (!drawn_[static_cast<size_t>(slot)]) {
      drawn_[static_cast<size_t>(slot)] = true;
      missing.push_back(slot);
    }
  }
  // One generator per sample, so the bytes do not depend on the threads' split.
  at::parallel_for(0, static_cast<int64_t>(missing.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t slot = missing[static_cast<size_t>(k)];
      auto generator = at::make_generator<at::CPUGeneratorImpl>(sample_seed(seed_, slot));
      // Note [Targets]: float targets are drawn after the input, from the same generator.
      model_.make_sample(pool_inputs_[slot], values ? torch::Tensor() : pool_targets_[slot],
                         targets_.num_classes, generator);
      if (targets_.kind == TargetSpec::Kind::kValues) {
        pool_targets_[slot].normal_(0.0, 1.0, generator);
      }
      if (targets_.kind == TargetSpec::Kind::kUnitValues) {
        pool_targets_[slot].uniform_(0.0, 1.0, generator);
      }
    }
  });
}

HostBatch SyntheticData::make_batch(SampleRange range) const {
  HostBatch batch{allocate_rows(range.count, input_shape_, model_.input_dtype, pin_memory_),
                  allocate_rows(range.count, target_shape_, target_dtype(), pin_memory_)};
  std::vector<int64_t> slots(static_cast<size_t>(range.count));
  for (int64_t i = 0; i < range.count; ++i) {
    slots[static_cast<size_t>(i)] = (range.first + i) % pool_size_;
  }
  fill(slots);
  // Rows are copied in runs of consecutive slots (a batch wraps around the pool at most a
  // few times), each run split over the intra-op threads by copy_.
  for (int64_t i = 0; i < range.count;) {
    const int64_t slot = slots[static_cast<size_t>(i)];
    const int64_t run = std::min(range.count - i, pool_size_ - slot);
    batch.inputs.narrow(0, i, run).copy_(pool_inputs_.narrow(0, slot, run));
    batch.targets.narrow(0, i, run).copy_(pool_targets_.narrow(0, slot, run));
    i += run;
  }
  return batch;
}

}  // namespace scalebench
