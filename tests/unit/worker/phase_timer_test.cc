// PhaseTimer: CPU intervals, nesting (step = phases + rest), bounds; CUDA events on a GPU.
#include "worker/phase_timer.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
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

TEST(PhaseTimer, BeginTimesAreMeasuredFromTheOrigin) {
  // Note [Shared cell clock]: begin times are seconds since mark_origin; the inner phase
  // lies inside the enclosing one; rows follow each other; a phase not run is NaN.
  auto timer = make_phase_timer(torch::kCPU, 3, 2);  // a, b (never run), step
  timer->mark_origin();
  std::this_thread::sleep_for(milliseconds(10));
  for (int row = 0; row < 2; ++row) {
    {
      PhaseScope step(*timer, 2);
      std::this_thread::sleep_for(milliseconds(2));
      PhaseScope a(*timer, 0);
      std::this_thread::sleep_for(milliseconds(5));
    }
    timer->next_iteration();
  }
  const auto begins = timer->resolve_begins();
  const auto seconds = timer->resolve();
  ASSERT_EQ(begins.size(), 6U);
  for (size_t row = 0; row < 2; ++row) {
    const double* b = &begins[row * 3];
    const double* d = &seconds[row * 3];
    EXPECT_GE(b[0], b[2] + 0.002) << row;
    EXPECT_LE(b[0] + d[0], b[2] + d[2]) << row;
    EXPECT_TRUE(std::isnan(b[1])) << row;
  }
  EXPECT_GE(begins[2], 0.010);                   // the first step began after the 10 ms
  EXPECT_GE(begins[5], begins[2] + seconds[2]);  // row 1 after row 0
}

TEST(PhaseTimer, WithoutAnOriginEveryBeginIsNaN) {
  auto timer = make_phase_timer(torch::kCPU, 1, 1);
  timer->begin(0);
  timer->end(0);
  const auto begins = timer->resolve_begins();
  ASSERT_EQ(begins.size(), 1U);
  EXPECT_TRUE(std::isnan(begins[0]));
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
