// CollectiveBackend implementations over real MPI ranks: the MPI backend on CPU tensors
// (and CUDA tensors staged through host when a GPU is present); the NCCL backend when a
// GPU is present (GTEST_SKIP otherwise).
#include "worker/collective_backend.h"

#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <chrono>
#include <vector>

#include "common/base/deadline_watchdog.h"
#include "common/base/error.h"
#include "protocol/mpi_check.h"
#include "protocol/mpi_comm.h"

namespace scalebench {
namespace {

/// 1 + 2 + ... + world: the sum of (rank + 1) over ranks.
double triangle(int world) { return world * (world + 1) / 2.0; }

TEST(MpiBackend, ReportsGroupShape) {
  auto backend = make_mpi_backend(MPI_COMM_WORLD);
  EXPECT_EQ(backend->name(), "mpi");
  EXPECT_EQ(backend->rank(), world_rank());
  EXPECT_EQ(backend->size(), world_size());
  EXPECT_FALSE(backend->abort());
}

TEST(MpiBackend, AllreduceSumEveryDtype) {
  auto backend = make_mpi_backend(MPI_COMM_WORLD);
  const int rank = backend->rank();
  const double expected = triangle(backend->size());
  for (const auto dtype : {torch::kFloat, torch::kDouble, torch::kHalf, torch::kBFloat16,
                           torch::kInt, torch::kLong, torch::kChar, torch::kByte}) {
    auto tensor = torch::full({1001}, rank + 1, torch::TensorOptions().dtype(dtype));
    backend->allreduce_sum(tensor)->wait();
    EXPECT_EQ(tensor.scalar_type(), dtype);
    EXPECT_TRUE(torch::all(tensor.to(torch::kDouble) == expected).item<bool>())
        << c10::toString(dtype);
  }
}

TEST(MpiBackend, ManyInFlightWaitedInReverseOrder) {
  auto backend = make_mpi_backend(MPI_COMM_WORLD);
  const int rank = backend->rank();
  const int world = backend->size();
  std::vector<torch::Tensor> tensors;
  std::vector<std::unique_ptr<CollectiveWork>> works;
  for (int i = 0; i < 16; ++i) {
    // Element j of tensor i on rank r: (r + 1) * (i + j); the sum is triangle * (i + j).
    tensors.push_back((torch::arange(1 + 100 * i, torch::kDouble) + i) * (rank + 1));
    works.push_back(backend->allreduce_sum(tensors.back()));
  }
  for (int i = 15; i >= 0; --i) works[i]->wait();
  for (int i = 0; i < 16; ++i) {
    const auto expected = (torch::arange(1 + 100 * i, torch::kDouble) + i) * triangle(world);
    EXPECT_TRUE(torch::equal(tensors[i], expected)) << "tensor " << i;
  }
  works[0]->wait();  // a second wait is a no-op
}

TEST(MpiBackend, BroadcastFromLastRank) {
  auto backend = make_mpi_backend(MPI_COMM_WORLD);
  const int root = backend->size() - 1;
  for (const auto dtype : {torch::kFloat, torch::kHalf, torch::kLong}) {
    auto tensor =
        torch::full({3, 7}, backend->rank() * 10 + 1, torch::TensorOptions().dtype(dtype));
    backend->broadcast(tensor, root);
    EXPECT_TRUE(torch::all(tensor == root * 10 + 1).item<bool>()) << c10::toString(dtype);
  }
  auto tensor = torch::zeros({2});
  EXPECT_THROW(backend->broadcast(tensor, backend->size()), CellError);
}

TEST(MpiBackend, WorksOnSubgroupCommunicator) {
  const int rank = world_rank();
  MPI_Comm half = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
  const Communicator owned(half);
  auto backend = make_mpi_backend(owned.get());
  // Members of my parity: ranks p, p+2, ...; the sum of their world ranks.
  double expected = 0;
  for (int r = rank % 2; r < world_size(); r += 2) expected += r;
  auto tensor = torch::full({5}, static_cast<double>(rank), torch::kDouble);
  backend->allreduce_sum(tensor)->wait();
  EXPECT_TRUE(torch::all(tensor == expected).item<bool>());
  EXPECT_EQ(backend->size(), owned.size());
}

TEST(MpiBackend, RejectsNonContiguousAndUnsupported) {
  auto backend = make_mpi_backend(MPI_COMM_WORLD);
  auto strided = torch::zeros({4, 4}).t();
  EXPECT_THROW(backend->allreduce_sum(strided), CellError);
  auto flags = torch::zeros({4}, torch::kBool);
  EXPECT_THROW(backend->allreduce_sum(flags), CellError);
}

TEST(MpiBackendGpu, StagesCudaTensorsThroughHost) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto backend = make_mpi_backend(MPI_COMM_WORLD);
  const int device = backend->rank() % static_cast<int>(torch::cuda::device_count());
  auto tensor =
      torch::full({257}, backend->rank() + 1,
                  torch::TensorOptions().dtype(torch::kHalf).device(torch::kCUDA, device));
  backend->allreduce_sum(tensor)->wait();
  EXPECT_TRUE(tensor.is_cuda());
  EXPECT_TRUE(
      torch::all(tensor.cpu().to(torch::kDouble) == triangle(backend->size())).item<bool>());
}

#ifdef SCALEBENCH_HAVE_CUDA
TEST(NcclBackendGpu, SingleRankGroupPerProcess) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int device = world_rank() % static_cast<int>(torch::cuda::device_count());
  auto backend = make_nccl_backend(MPI_COMM_SELF, device);
  EXPECT_EQ(backend->name(), "nccl");
  EXPECT_EQ(backend->size(), 1);
  const auto options = torch::TensorOptions().device(torch::kCUDA, device);
  auto tensor = torch::arange(1000, options.dtype(torch::kFloat));
  backend->allreduce_sum(tensor)->wait();
  EXPECT_TRUE(torch::equal(tensor.cpu(), torch::arange(1000, torch::kFloat)));
  auto half = torch::full({64}, 3, options.dtype(torch::kBFloat16));
  backend->broadcast(half, 0);
  EXPECT_TRUE(torch::all(half.cpu() == 3).item<bool>());
  EXPECT_TRUE(backend->abort());
  EXPECT_THROW(backend->allreduce_sum(tensor), NcclError);
}

/// Whether every rank sees at least as many GPUs as there are ranks, decided together: a
/// skip on one rank and a collective on another would hang.
bool every_rank_has_a_gpu() {
  const auto gpus = static_cast<int>(torch::cuda::device_count());
  int enough = gpus >= world_size() ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &enough, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return enough != 0;
}

TEST(NcclBackendGpu, WholeWorldWhenEachRankHasAGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  if (!every_rank_has_a_gpu()) GTEST_SKIP() << "fewer GPUs than ranks";
  auto backend = make_nccl_backend(MPI_COMM_WORLD, world_rank());
  const auto options = torch::TensorOptions().device(torch::kCUDA, world_rank());
  auto tensor = torch::full({4096}, world_rank() + 1, options);
  auto work = backend->allreduce_sum(tensor);
  work->wait();
  EXPECT_TRUE(torch::all(tensor.cpu() == triangle(world_size())).item<bool>());
  auto value = torch::full({8}, world_rank() * 2.0, options.dtype(torch::kDouble));
  backend->broadcast(value, 1);
  EXPECT_TRUE(torch::all(value.cpu() == 2.0).item<bool>());
}

// Note [Collective watchdog]: rank 0 enters an allreduce that no other rank joins; the
// watchdog's abort() from another thread ends it with an error instead of a hang.
TEST(NcclBackendGpu, AbortFromAWatchdogEndsAHungAllreduce) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  if (!every_rank_has_a_gpu()) GTEST_SKIP() << "fewer GPUs than ranks (NCCL: one GPU per rank)";
  auto backend = make_nccl_backend(MPI_COMM_WORLD, world_rank());
  if (world_rank() == 0) {
    const auto options = torch::TensorOptions().device(torch::kCUDA, 0);
    auto tensor = torch::ones({1024}, options);
    const auto start = std::chrono::steady_clock::now();
    const DeadlineWatchdog watchdog(start + std::chrono::seconds(1),
                                    [&backend] { EXPECT_TRUE(backend->abort()); });
    EXPECT_THROW(
        {
          auto work = backend->allreduce_sum(tensor);
          work->wait();
          torch::cuda::synchronize(0);
          backend->allreduce_sum(tensor)->wait();  // after the abort: the next call throws
        },
        NcclError);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  }
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}
#endif

}  // namespace
}  // namespace scalebench
