// Synthetic data: sample identity independent of batching, shards, training indices.
#include "worker/synthetic_data.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <set>

#include "worker/cpu_allocation_counter.h"

namespace scalebench {
namespace {

TEST(SyntheticData, ShardRangesAreContiguousAndBalanced) {
  struct Case {
    int64_t samples;
    int world;
    std::vector<SampleRange> expected;
  };
  const std::vector<Case> cases = {
      {10, 1, {{0, 10}}},
      {10, 2, {{0, 5}, {5, 5}}},
      {10, 3, {{0, 4}, {4, 3}, {7, 3}}},
      {2, 3, {{0, 1}, {1, 1}, {2, 0}}},
      {0, 2, {{0, 0}, {0, 0}}},
  };
  for (const auto& c : cases) {
    for (int rank = 0; rank < c.world; ++rank) {
      EXPECT_EQ(shard_range(c.samples, rank, c.world), c.expected[rank])
          << c.samples << " samples, rank " << rank << " of " << c.world;
    }
  }
}

TEST(SyntheticData, TrainingIndicesDoNotOverlapAcrossRanksOrIterations) {
  std::set<int64_t> seen;
  for (int64_t iteration = 0; iteration < 3; ++iteration) {
    for (int rank = 0; rank < 3; ++rank) {
      const int64_t first = train_first_sample(iteration, rank, 3, 4);
      for (int64_t i = first; i < first + 4; ++i) EXPECT_TRUE(seen.insert(i).second) << i;
    }
  }
  EXPECT_EQ(*seen.rbegin(), 3 * 3 * 4 - 1);
}

TEST(SyntheticData, SampleSeedsDifferAndAreStable) {
  EXPECT_EQ(sample_seed(7, 3), sample_seed(7, 3));
  EXPECT_NE(sample_seed(7, 3), sample_seed(7, 4));
  EXPECT_NE(sample_seed(7, 3), sample_seed(8, 3));
}

TEST(SyntheticData, ASampleIsTheSameWhicheverBatchMakesIt) {
  for (const std::string name : {"mlp", "unet3d", "transformer"}) {
    SCOPED_TRACE(name);
    const ModelInfo& info = find_model(name);
    const std::vector<int64_t> shape =
        name == "unet3d" ? std::vector<int64_t>{1, 8, 8, 8} : info.default_input_shape;
    const SyntheticData data(info, shape, info.default_num_classes, 42, /*pin_memory=*/false);
    const HostBatch whole = data.make_batch({0, 8});
    const HostBatch part = data.make_batch({3, 3});
    EXPECT_TRUE(torch::equal(whole.inputs.slice(0, 3, 6), part.inputs));
    EXPECT_TRUE(torch::equal(whole.targets.slice(0, 3, 6), part.targets));
    EXPECT_FALSE(torch::equal(whole.inputs[0], whole.inputs[1]));
    EXPECT_EQ(whole.inputs.scalar_type(), info.input_dtype);
    EXPECT_GE(whole.targets.min().item<int64_t>(), 0);
    EXPECT_LT(whole.targets.max().item<int64_t>(), info.default_num_classes);
    const SyntheticData other_seed(info, shape, info.default_num_classes, 43, false);
    EXPECT_FALSE(torch::equal(other_seed.make_batch({0, 8}).inputs, whole.inputs));
  }
}

// Note [Synthetic samples]: the stream repeats with the pool's period, a batch that wraps
// around the pool equals its parts, and pool sample j is the draw of sample_seed(seed, j).
TEST(SyntheticData, TheStreamRepeatsWithThePoolsPeriod) {
  EXPECT_EQ(pool_samples(602112 + 8), 891);  // ResNet-50 at 224 x 224, fp32, one class id
  EXPECT_EQ(pool_samples(1), 65536);
  EXPECT_EQ(pool_samples(int64_t{64} << 20), 256);
  const ModelInfo& info = find_model("mlp");
  const SyntheticData data(info, {16}, 10, 42, /*pin_memory=*/false);
  const int64_t period = data.pool_size();
  EXPECT_EQ(period, pool_samples(16 * 4 + 8));
  const HostBatch wrapped = data.make_batch({period - 3, 6});  // slots p-3..p-1, 0..2
  const HostBatch head = data.make_batch({0, 3});
  const HostBatch tail = data.make_batch({period - 3, 3});
  EXPECT_TRUE(torch::equal(wrapped.inputs.slice(0, 0, 3), tail.inputs));
  EXPECT_TRUE(torch::equal(wrapped.inputs.slice(0, 3, 6), head.inputs));
  EXPECT_TRUE(torch::equal(wrapped.targets.slice(0, 3, 6), head.targets));
  EXPECT_TRUE(
      torch::equal(data.make_batch({5 * period + 1, 2}).inputs, head.inputs.slice(0, 1, 3)));
  EXPECT_FALSE(torch::equal(head.inputs[0], head.inputs[1]));
  auto generator = at::make_generator<at::CPUGeneratorImpl>(sample_seed(42, 2));
  const auto input = torch::empty({16});
  const auto target = torch::empty({}, torch::kInt64);
  info.make_sample(input, target, 10, generator);
  EXPECT_TRUE(torch::equal(head.inputs[2], input));
  EXPECT_TRUE(torch::equal(head.targets[2], target));
}

// The pool is the data's cache: a CPU cell's memory budget (Note [Counting CPU allocations])
// counts the batch it is given, never the pool behind it.
TEST(SyntheticData, ThePoolIsNotCountedAsTheCellsMemory) {
  start_counting_cpu_allocations();
  const int64_t before = current_counted_cpu_bytes();
  {
    const SyntheticData data(find_model("mlp"), {16}, 10, 1, /*pin_memory=*/false);
    const HostBatch batch = data.make_batch({0, 4});
    EXPECT_EQ(data.pool_size() * (16 * 4 + 8), 65536 * 72) << "a 4.5 MiB pool";
    EXPECT_LT(current_counted_cpu_bytes() - before, 64 << 10) << "the batch alone is counted";
  }
  stop_counting_cpu_allocations();
}

TEST(SyntheticData, ShapesOfBatches) {
  const ModelInfo& unet = find_model("unet3d");
  const SyntheticData data(unet, {1, 8, 16, 8}, 3, 1, false);
  const HostBatch batch = data.make_batch({5, 2});
  EXPECT_EQ(batch.inputs.sizes().vec(), (std::vector<int64_t>{2, 1, 8, 16, 8}));
  EXPECT_EQ(batch.targets.sizes().vec(), (std::vector<int64_t>{2, 8, 16, 8}));
  EXPECT_LT(batch.targets.max().item<int64_t>(), 3);
  const ModelInfo& tokens = find_model("transformer");
  const HostBatch text = SyntheticData(tokens, {16}, 2, 1, false).make_batch({0, 4});
  EXPECT_LT(text.inputs.max().item<int64_t>(), models::kTransformerVocab);
  EXPECT_EQ(text.targets.sizes().vec(), (std::vector<int64_t>{4}));
}

}  // namespace
}  // namespace scalebench
