// PhaseTimer: CPU intervals, nesting (step = phases + rest), bounds; CUDA events on a GPU.
#include "worker/phase_timer.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <thread>

namespace scalebench {
namespace {

using std::chrono::milliseconds;

TEST(PhaseTimer, CpuPhasesSumToTheStep) {
  auto timer = make_phase_timer(torch::kCPU, 3, 4);  // a, b, step
  for (int row = 0; row < 2; ++row) {
    {
      PhaseScope step(*timer, 2);
      {
        PhaseScope a(*timer, 0);
        std::this_thread::sleep_for(milliseconds(20));
      }
      {
        PhaseScope b(*timer, 1);
        std::this_thread::sleep_for(milliseconds(10));
      }
    }
    timer->next_iteration();
  }
  const auto seconds = timer->resolve();
  ASSERT_EQ(timer->rows(), 2u);
  ASSERT_EQ(seconds.size(), 6u);
  for (size_t row = 0; row < 2; ++row) {
    const double a = seconds[row * 3], b = seconds[row * 3 + 1], step = seconds[row * 3 + 2];
    EXPECT_GE(a, 0.020);
    EXPECT_GE(b, 0.010);
    EXPECT_GE(step, a + b);
    EXPECT_LT(step - a - b, 0.005) << "time outside the phases";
  }
}

TEST(PhaseTimer, RowsAdvanceAndUnrecordedPhasesReadZero) {
  auto timer = make_phase_timer(torch::kCPU, 2, 3);
  timer->begin(1);
  std::this_thread::sleep_for(milliseconds(5));
  timer->end(1);
  timer->next_iteration();
  timer->begin(0);
  timer->end(0);
  timer->next_iteration();
  const auto seconds = timer->resolve();
  ASSERT_EQ(timer->rows(), 2u);
  ASSERT_EQ(seconds.size(), 4u);
  EXPECT_EQ(seconds[0], 0.0);  // phase 0 never ran in row 0
  EXPECT_GE(seconds[1], 0.005);
  EXPECT_GE(seconds[2], 0.0);
  EXPECT_EQ(seconds[3], 0.0);
}

TEST(PhaseTimer, RejectsOutOfRangeMarks) {
  auto timer = make_phase_timer(torch::kCPU, 2, 1);
  EXPECT_THROW(timer->begin(2), std::out_of_range);
  timer->begin(0);
  timer->end(0);
  timer->next_iteration();
  EXPECT_THROW(timer->begin(0), std::out_of_range);
}

TEST(PhaseTimerGpu, CudaEventsTimeGpuWork) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU";
  const torch::Device device(torch::kCUDA, 0);
  auto timer = make_phase_timer(device, 2, 2);
  auto a = torch::randn({2048, 2048}, device);
  {
    PhaseScope step(*timer, 1);
    PhaseScope work(*timer, 0);
    for (int i = 0; i < 10; ++i) a = torch::matmul(a, a).tanh_();
  }
  const auto seconds = timer->resolve();
  ASSERT_EQ(seconds.size(), 2u);
  EXPECT_GT(seconds[0], 0.0);
  EXPECT_GE(seconds[1], seconds[0]);
}

}  // namespace
}  // namespace scalebench
