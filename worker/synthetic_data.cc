#include "worker/synthetic_data.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

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

SyntheticData::SyntheticData(const ModelInfo& model, std::vector<int64_t> input_shape,
                             int64_t num_classes, uint64_t seed, bool pin_memory)
    : model_(model),
      input_shape_(std::move(input_shape)),
      target_shape_(target_shape(model, input_shape_)),
      num_classes_(num_classes),
      seed_(seed),
      pin_memory_(pin_memory) {}

HostBatch SyntheticData::make_batch(SampleRange range) const {
  HostBatch batch = allocate_host_batch(range.count, input_shape_, model_.input_dtype,
                                        target_shape_, pin_memory_);
  for (int64_t i = 0; i < range.count; ++i) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(sample_seed(seed_, range.first + i));
    model_.make_sample(batch.inputs[i], batch.targets[i], num_classes_, generator);
  }
  return batch;
}

}  // namespace scalebench
