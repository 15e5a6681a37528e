// Where a rank runs (worker/device_selection.h): the CPU is chosen without a GPU, and the
// per-rank placement metrics are real figures of this process.
#include "worker/device_selection.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <torch/cuda.h>

#include <thread>

#include "common/base/error.h"

namespace scalebench {
namespace {

TEST(DeviceSelection, CpuWithoutAGpuAndCudaRequestsFailWithAReason) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA GPU is present";
  WorkerContext context;
  EXPECT_EQ(select_device(Device::kAuto, context), torch::Device(torch::kCPU));
  EXPECT_EQ(describe(torch::kCPU), "cpu");
  EXPECT_THROW(select_device(Device::kCuda, context), CellError);
}

TEST(DeviceSelection, PlacementMetricsDescribeThisProcess) {
  const auto metrics = device_metrics(torch::kCPU);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  EXPECT_EQ(metrics.at("cpu_affinity_cores"), CPU_COUNT(&allowed));
  EXPECT_LE(metrics.at("cpu_affinity_cores"), std::thread::hardware_concurrency());
  EXPECT_GE(metrics.at("numa_node"), -1.0);
  EXPECT_EQ(metrics.count("gpu_memory_bytes"), 0U) << "no GPU figures for a CPU rank";
}

}  // namespace
}  // namespace scalebench
