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
                             TargetSpec targets, uint64_t seed, bool pin_memory)
    : model_(model),
      input_shape_(std::move(input_shape)),
      targets_(std::move(targets)),
      target_shape_(targets_.shape.value_or(target_shape(model, input_shape_))),
      seed_(seed),
      pin_memory_(pin_memory) {}

SyntheticData::SyntheticData(const ModelInfo& model, const std::vector<int64_t>& input_shape,
                             int64_t num_classes, uint64_t seed, bool pin_memory)
    : SyntheticData(
          model, input_shape,
          TargetSpec{.shape = target_shape(model, input_shape), .num_classes = num_classes}, seed,
          pin_memory) {}

HostBatch SyntheticData::make_batch(SampleRange range) const {
  const bool values = targets_.is_float();
  HostBatch batch{allocate_rows(range.count, input_shape_, model_.input_dtype, pin_memory_),
                  allocate_rows(range.count, target_shape_,
                                values ? torch::kFloat32 : torch::kInt64, pin_memory_)};
  for (int64_t i = 0; i < range.count; ++i) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(sample_seed(seed_, range.first + i));
    // Note [Targets]: float targets are drawn after the input, from the same generator.
    model_.make_sample(batch.inputs[i], values ? torch::Tensor() : batch.targets[i],
                       targets_.num_classes, generator);
    if (targets_.kind == TargetSpec::Kind::kValues) batch.targets[i].normal_(0.0, 1.0, generator);
    if (targets_.kind == TargetSpec::Kind::kUnitValues) {
      batch.targets[i].uniform_(0.0, 1.0, generator);
    }
  }
  return batch;
}

}  // namespace scalebench
