// Note [Worker deadline]: a worker rank whose cell runs past timeout_s + its overrun limit
// ends itself with kExitWorkerDeadline and says why, whether or not rank 0 can be reached;
// a cell that ends in time cancels it.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/base/exit_status.h"
#include "protocol/worker_loop.h"

namespace scalebench {
namespace {

CellSpec short_cell() {
  CellSpec cell;
  cell.experiment = "stuck";
  cell.timeout_s = 0.05;
  return finalize_cell_id(cell);
}

TEST(WorkerDeadlineDeathTest, ARankStuckPastItsDeadlineEndsItself) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  WorkerContext context;
  context.world_rank = 3;
  context.overrun_limit_s = 0.05;
  EXPECT_EXIT(
      {
        const auto watchdog = watch_own_deadline(short_cell(), context);
        std::this_thread::sleep_for(std::chrono::seconds(30));  // stuck in a collective
      },
      testing::ExitedWithCode(kExitWorkerDeadline), "worker rank 3 ends itself: cell .*stuck");
}

TEST(WorkerDeadline, ACellThatEndsInTimeCancelsIt) {
  WorkerContext context;
  context.overrun_limit_s = 0.2;
  {
    const auto watchdog = watch_own_deadline(short_cell(), context);
    ASSERT_NE(watchdog, nullptr);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past it: still alive
  context.overrun_limit_s = 0;
  EXPECT_EQ(watch_own_deadline(short_cell(), context), nullptr) << "0: never";
}

}  // namespace
}  // namespace scalebench
