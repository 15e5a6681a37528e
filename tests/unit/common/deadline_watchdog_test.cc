// DeadlineWatchdog: the action runs once at the deadline, or never when the watchdog is
// destroyed first (the worker's collective watchdog, Note [Collective watchdog]).
#include "common/base/deadline_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace scalebench {
namespace {

using namespace std::chrono_literals;

TEST(DeadlineWatchdog, RunsTheActionOnceAtTheDeadline) {
  std::atomic<int> runs{0};
  const auto start = DeadlineWatchdog::Clock::now();
  DeadlineWatchdog watchdog(start + 50ms, [&runs] { ++runs; });
  while (runs.load() == 0 && DeadlineWatchdog::Clock::now() - start < 5s) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(runs.load(), 1);
  EXPECT_GE(DeadlineWatchdog::Clock::now() - start, 50ms);
  EXPECT_TRUE(watchdog.fired());
}

TEST(DeadlineWatchdog, NeverRunsWhenDestroyedBeforeTheDeadline) {
  std::atomic<int> runs{0};
  {
    const DeadlineWatchdog watchdog(DeadlineWatchdog::Clock::now() + 10s, [&runs] { ++runs; });
    EXPECT_FALSE(watchdog.fired());
  }  // returns at once, not after 10 s
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(runs.load(), 0);
}

TEST(DeadlineWatchdog, APassedDeadlineRunsAtOnce) {
  std::atomic<int> runs{0};
  {
    const DeadlineWatchdog watchdog(DeadlineWatchdog::Clock::now() - 1s, [&runs] { ++runs; });
    while (runs.load() == 0) std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(runs.load(), 1);
}

}  // namespace
}  // namespace scalebench
