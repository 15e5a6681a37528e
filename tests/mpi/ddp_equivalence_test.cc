// DDP with the GradientReducer over the MPI backend equals single-process training on the
// concatenated batch; all ranks stay identical; buckets overlap backward; unused
// parameters neither hang nor break the average.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cstdio>
#include <functional>

#include "common/base/error.h"
#include "protocol/mpi_check.h"
#include "worker/collective_backend.h"
#include "worker/gradient_reducer.h"

namespace scalebench {
namespace {

constexpr int kSteps = 5;
constexpr int64_t kPerRankBatch = 4;

int world_rank_() {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  return rank;
}
int world_size_() {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return size;
}

torch::Tensor flat_copy(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> parts;
  for (const auto& t : tensors) parts.push_back(t.detach().reshape({-1}).to(torch::kDouble));
  return torch::cat(parts);
}

double max_abs_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  return (flat_copy(a) - flat_copy(b)).abs().max().item<double>();
}

/// max over elements of (max over ranks - min over ranks): 0 when all ranks agree exactly.
double cross_rank_spread(const std::vector<torch::Tensor>& tensors) {
  const torch::Tensor local = flat_copy(tensors).contiguous();
  torch::Tensor high = local.clone();
  torch::Tensor low = local.clone();
  const int count = static_cast<int>(local.numel());
  MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, high.data_ptr(), count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, low.data_ptr(), count, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
  return (high - low).max().item<double>();
}

void copy_parameters(const std::vector<torch::Tensor>& from, std::vector<torch::Tensor> to) {
  const torch::NoGradGuard no_grad;
  for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
}

struct EquivalenceResult {
  double diff_to_reference = 0;
  double spread_after_broadcast = 0;
  double spread_after_training = 0;
  size_t buckets = 0;
  size_t min_launched_in_backward = SIZE_MAX;
  size_t max_launched_in_finalize = 0;
};

/// K SGD steps of DDP (per-rank batch b) and of one process on all ranks' data (batch
/// world*b), from the same weights: rank-dependent init, then broadcast from rank 0.
EquivalenceResult train_both(const std::function<torch::nn::Sequential()>& make_model,
                             std::vector<int64_t> input_shape, int64_t outputs,
                             ReducerOptions options) {
  const int rank = world_rank_();
  const int world = world_size_();
  torch::manual_seed(100 + rank);
  auto model = make_model();
  auto reference = make_model();
  auto backend = make_mpi_backend(MPI_COMM_WORLD);
  GradientReducer reducer(model->parameters(), *backend, options);
  reducer.broadcast_parameters({});
  EquivalenceResult result;
  result.spread_after_broadcast = cross_rank_spread(model->parameters());
  result.buckets = reducer.buckets().size();
  copy_parameters(model->parameters(), reference->parameters());

  torch::manual_seed(7);  // the same data on every rank
  std::vector<int64_t> data_shape{kSteps, world * kPerRankBatch};
  data_shape.insert(data_shape.end(), input_shape.begin(), input_shape.end());
  const auto inputs = torch::randn(data_shape);
  const auto targets = torch::randn({kSteps, world * kPerRankBatch, outputs});

  const auto sgd = torch::optim::SGDOptions(0.05).momentum(0.9);
  torch::optim::SGD optimizer(model->parameters(), sgd);
  torch::optim::SGD reference_optimizer(reference->parameters(), sgd);
  for (int step = 0; step < kSteps; ++step) {
    optimizer.zero_grad();
    const auto local_x = inputs[step].narrow(0, rank * kPerRankBatch, kPerRankBatch);
    const auto local_y = targets[step].narrow(0, rank * kPerRankBatch, kPerRankBatch);
    const auto loss = torch::mse_loss(model->forward(local_x), local_y);
    reducer.prepare_for_backward();
    loss.backward();
    reducer.finalize();
    optimizer.step();
    const auto stats = reducer.last_iteration_stats();
    result.min_launched_in_backward =
        std::min(result.min_launched_in_backward, stats.buckets_launched_in_backward);
    result.max_launched_in_finalize =
        std::max(result.max_launched_in_finalize, stats.buckets_launched_in_finalize);

    reference_optimizer.zero_grad();
    torch::mse_loss(reference->forward(inputs[step]), targets[step]).backward();
    reference_optimizer.step();
  }
  result.diff_to_reference = max_abs_diff(model->parameters(), reference->parameters());
  result.spread_after_training = cross_rank_spread(model->parameters());
  return result;
}

void report(const char* name, const EquivalenceResult& r) {
  if (world_rank_() != 0) return;
  std::printf(
      "[ddp] %s world=%d buckets=%zu max_abs_diff_to_single_process=%.3g "
      "cross_rank_spread=%.3g launched_in_backward(min)=%zu\n",
      name, world_size_(), r.buckets, r.diff_to_reference, r.spread_after_training,
      r.min_launched_in_backward);
}

void expect_equivalent(const EquivalenceResult& r, double tolerance) {
  EXPECT_EQ(r.spread_after_broadcast, 0.0) << "broadcast_parameters left replicas different";
  EXPECT_EQ(r.spread_after_training, 0.0) << "replicas diverged";
  EXPECT_LE(r.diff_to_reference, tolerance);
  EXPECT_GE(r.buckets, 3u);
  // Every parameter is used, so every bucket is launched from an autograd hook during
  // backward, none by finalize().
  EXPECT_EQ(r.min_launched_in_backward, r.buckets);
  EXPECT_EQ(r.max_launched_in_finalize, 0u);
}

TEST(DdpEquivalence, MlpMatchesSingleProcessOnConcatenatedBatch) {
  const auto make = [] {
    return torch::nn::Sequential(torch::nn::Linear(12, 32), torch::nn::Tanh(),
                                 torch::nn::Linear(32, 32), torch::nn::ReLU(),
                                 torch::nn::Linear(32, 3));
  };
  // 1 KiB caps: buckets {32 bias + last Linear}, {32x32 weight}, {first bias}, {32x12 weight}.
  const auto result =
      train_both(make, {12}, 3, ReducerOptions{.bucket_bytes = 1024, .first_bucket_bytes = 1024});
  report("mlp", result);
  expect_equivalent(result, 1e-5);
}

TEST(DdpEquivalence, ConvNetMatchesSingleProcessOnConcatenatedBatch) {
  const auto make = [] {
    return torch::nn::Sequential(
        torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)), torch::nn::ReLU(),
        torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 8, 3).stride(2)), torch::nn::ReLU(),
        torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions(1)), torch::nn::Flatten(),
        torch::nn::Linear(8, 5));
  };
  // Buckets {Linear, last conv bias}, {last conv weight}, {first conv}.
  const auto result = train_both(make, {3, 10, 10}, 5,
                                 ReducerOptions{.bucket_bytes = 1024, .first_bucket_bytes = 512});
  report("convnet", result);
  expect_equivalent(result, 1e-4);
}

TEST(DdpUnusedParameters, FinalizeReducesBucketsWhoseGradientsNeverArrived) {
  const int rank = world_rank_();
  const int world = world_size_();
  torch::manual_seed(1);
  auto used = torch::randn({5}).requires_grad_();
  auto rank0_only = torch::randn({3}).requires_grad_();
  auto never = torch::randn({2}).requires_grad_();
  auto backend = make_mpi_backend(MPI_COMM_WORLD);
  // 4-byte caps: one bucket per parameter, bucket 0 = `never`, which blocks the hooks.
  GradientReducer reducer({used, rank0_only, never}, *backend,
                          ReducerOptions{.bucket_bytes = 4, .first_bucket_bytes = 4});
  ASSERT_EQ(reducer.buckets().size(), 3u);
  const auto x = torch::full({5}, static_cast<float>(rank + 1));
  const auto y = torch::arange(1, 4, torch::kFloat);
  for (int iteration = 0; iteration < 2; ++iteration) {
    auto loss = (used * x).sum();
    if (rank == 0) loss = loss + (rank0_only * y).sum();
    reducer.prepare_for_backward();
    loss.backward();
    reducer.finalize();
    const auto stats = reducer.last_iteration_stats();
    EXPECT_EQ(stats.unused_parameters, rank == 0 ? 1u : 2u);
    EXPECT_EQ(stats.buckets_launched_in_backward + stats.buckets_launched_in_finalize, 3u);
    const float mean_x = static_cast<float>(world + 1) / 2.0F;
    EXPECT_TRUE(torch::allclose(used.grad(), torch::full({5}, mean_x)));
    EXPECT_TRUE(torch::allclose(rank0_only.grad(), y / world));
    ASSERT_TRUE(never.grad().defined());
    EXPECT_EQ(never.grad().abs().max().item<float>(), 0.0F);
    // Next pass: `used` accumulates into a defined zero grad, `rank0_only` starts
    // undefined, and `never` keeps a defined grad that must come back as zeros.
    used.mutable_grad().zero_();
    rank0_only.mutable_grad() = torch::Tensor();
  }
}

TEST(DdpReducerContract, IgnoresUnarmedBackwardAndRejectsMisuse) {
  auto weight = torch::ones({4}).requires_grad_();
  auto backend = make_mpi_backend(MPI_COMM_WORLD);
  GradientReducer reducer({weight}, *backend, ReducerOptions{});
  (weight * 2).sum().backward();  // not armed: the hook must do nothing
  EXPECT_THROW(reducer.finalize(), CellError);
  reducer.prepare_for_backward();
  (weight * 3).sum().backward();
  reducer.finalize();
  // grad accumulated 2 + 3 before finalize; the mean over identical ranks keeps it.
  EXPECT_TRUE(torch::allclose(weight.grad(), torch::full({4}, 5.0F)));
  EXPECT_EQ(reducer.last_iteration_stats().buckets_launched_in_backward, 1u);
}

}  // namespace
}  // namespace scalebench
