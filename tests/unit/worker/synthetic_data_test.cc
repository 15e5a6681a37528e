// Synthetic data: sample identity independent of batching, shards, training indices.
#include "worker/synthetic_data.h"

#include <gtest/gtest.h>

#include <set>

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
