// Peak memory: VmHWM parsing, reading and resetting the process's peak RSS; CUDA peaks.
#include "worker/memory_stats.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "worker/cpu_allocation_counter.h"

namespace scalebench {
namespace {

TEST(MemoryStats, ParsesVmHwm) {
  struct Case {
    std::string text;
    std::optional<int64_t> bytes;
  };
  const std::vector<Case> cases = {
      {"Name:\tx\nVmPeak:\t  999 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n", 1234 * 1024},
      {"VmHWM: 0 kB", 0},
      {"VmRSS:\t 1000 kB\n", std::nullopt},
      {"VmHWM:\t abc kB\n", std::nullopt},
      {"VmHWM:\t 12\n", std::nullopt},
      {"", std::nullopt},
  };
  for (const auto& c : cases) EXPECT_EQ(parse_vmhwm_bytes(c.text), c.bytes) << c.text;
}

TEST(MemoryStats, ReadsAFileAndFailsGracefully) {
  const auto path = std::filesystem::temp_directory_path() / "scalebench_status_test";
  std::ofstream(path) << "VmHWM:\t  2048 kB\n";
  EXPECT_EQ(read_peak_rss_bytes(path.string()), 2048 * 1024);
  std::filesystem::remove(path);
  EXPECT_EQ(read_peak_rss_bytes("/nonexistent/status"), std::nullopt);
  EXPECT_FALSE(reset_peak_rss("/nonexistent/clear_refs"));
}

TEST(MemoryStats, PeakRssRisesWithTouchedMemoryAndResets) {
  if (!reset_peak_rss()) GTEST_SKIP() << "this kernel does not allow resetting VmHWM";
  const auto before = read_peak_rss_bytes();
  ASSERT_TRUE(before.has_value());
  constexpr size_t kBytes = 256u << 20;
  int64_t during = 0;
  {
    auto block = std::make_unique<char[]>(kBytes);
    std::memset(block.get(), 1, kBytes);
    during = read_peak_rss_bytes().value_or(0);
    EXPECT_GE(during, *before + static_cast<int64_t>(kBytes) / 2);
  }
  ASSERT_TRUE(reset_peak_rss());
  const auto after = read_peak_rss_bytes();
  ASSERT_TRUE(after.has_value());
  // The block was freed (munmap) and the peak reset to the current RSS.
  EXPECT_LT(*after, during - static_cast<int64_t>(kBytes) / 2);
}

TEST(MemoryStats, MetricsOnCpuHaveRssOnly) {
  const bool reset = reset_peak_memory(torch::kCPU);
  const auto metrics = peak_memory_metrics(torch::kCPU, reset);
  EXPECT_GT(metrics.at("peak_rss_bytes"), 0.0);
  EXPECT_EQ(metrics.at("peak_rss_reset"), reset ? 1.0 : 0.0);
  EXPECT_EQ(metrics.count("peak_allocated_bytes"), 0u);
}

TEST(MemoryStatsGpu, CudaPeaksFollowAllocations) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU";
  const torch::Device device(torch::kCUDA, 0);
  { auto big = torch::empty({64 << 20}, torch::TensorOptions(torch::kFloat).device(device)); }
  reset_peak_memory(device);
  auto small = torch::empty({1 << 20}, torch::TensorOptions(torch::kFloat).device(device));
  const auto metrics = peak_memory_metrics(device, true);
  EXPECT_GE(metrics.at("peak_allocated_bytes"), 4.0 * (1 << 20));
  EXPECT_LT(metrics.at("peak_allocated_bytes"), 4.0 * (64 << 20)) << "peak was reset";
  EXPECT_GE(metrics.at("peak_reserved_bytes"), metrics.at("peak_allocated_bytes"));
}

// A cell resets the peaks before its model reaches the GPU, when CUDA may not be initialised
// yet (seen on an H200: every GPU cell failed with "Invalid device argument"). Checked in a
// fresh process (a threadsafe death test re-runs the binary), where nothing touched CUDA.
TEST(MemoryStatsGpu, PeaksResetAndReadBeforeTheFirstCudaTensor) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const torch::Device device(torch::kCUDA, 0);
        reset_peak_memory(device);
        const auto metrics = peak_memory_metrics(device, true);
        std::exit(metrics.at("peak_allocated_bytes") == 0.0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// Note [Counting CPU allocations]: the counted peak is the bytes of the tensors alive at once,
// exactly, and a tensor counted while on is subtracted when freed after counting stopped.
TEST(CpuAllocationCounter, PeakIsTheTensorsAliveAtOnce) {
  start_counting_cpu_allocations();
  const int64_t before = current_counted_cpu_bytes();
  {
    const auto a = torch::empty({1 << 20}, torch::kFloat32);  // 4 MiB
    {
      const auto b = torch::empty({1 << 19}, torch::kFloat64);  // 4 MiB
      EXPECT_EQ(current_counted_cpu_bytes() - before, 8 << 20);
    }
    EXPECT_EQ(current_counted_cpu_bytes() - before, 4 << 20);
    stop_counting_cpu_allocations();
    const auto uncounted = torch::empty({1 << 20}, torch::kFloat32);
    EXPECT_EQ(current_counted_cpu_bytes() - before, 4 << 20);
  }
  EXPECT_EQ(current_counted_cpu_bytes(), before);
  EXPECT_GE(peak_counted_cpu_bytes() - before, 8 << 20);
  start_counting_cpu_allocations();  // the peak restarts at what is alive
  EXPECT_EQ(peak_counted_cpu_bytes(), current_counted_cpu_bytes());
  stop_counting_cpu_allocations();
  // Tensors made through the wrapper still work everywhere (raw interface included).
  const auto t = torch::arange(10, torch::kFloat32) * 2;
  EXPECT_EQ(t.sum().item<float>(), 90.0F);
}

TEST(MemoryBudget, TheLimitWins) {
  EXPECT_EQ(memory_budget_bytes(10, torch::kCPU, 2, true), 10.0 * 1024 * 1024);
  EXPECT_EQ(memory_budget_bytes(0, torch::kCPU, 2, false), 0);
  EXPECT_GT(memory_budget_bytes(0, torch::kCPU, 2, true), 0);  // this machine's MemAvailable / 2
  EXPECT_EQ(budgeted_peak_bytes({{"peak_rss_bytes", 5}, {"peak_allocated_bytes", 3}}, torch::kCPU),
            3);
  EXPECT_EQ(budgeted_peak_bytes({{"peak_rss_bytes", 5}}, torch::kCPU), 5);
}

}  // namespace
}  // namespace scalebench
