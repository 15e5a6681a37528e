// Note [Polling back-off]: eager after activity, 2 ms at most for the first second of
// silence, then 50 ms.
#include "protocol/poll_backoff.h"

#include <gtest/gtest.h>

#include <vector>

namespace scalebench {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(PollBackoff, StaysAtTwoHundredMicrosecondsRightAfterActivity) {
  microseconds sleep = PollBackoff::kFirst;
  std::vector<int64_t> seen;
  for (int i = 0; i < 4; ++i) {
    sleep = PollBackoff::next(sleep, milliseconds(10));
    seen.push_back(sleep.count());
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{100, 200, 200, 200}));
}

TEST(PollBackoff, DoublesToTwoMillisecondsWhileRecentlyActive) {
  microseconds sleep = PollBackoff::kFirst;
  std::vector<int64_t> seen;
  for (int i = 0; i < 8; ++i) {
    sleep = PollBackoff::next(sleep, milliseconds(100));
    seen.push_back(sleep.count());
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{100, 200, 400, 800, 1600, 2000, 2000, 2000}));
}

TEST(PollBackoff, GrowsToFiftyMillisecondsAfterASecondOfSilence) {
  microseconds sleep = PollBackoff::kBusyCap;
  std::vector<int64_t> seen;
  for (int i = 0; i < 6; ++i) {
    sleep = PollBackoff::next(sleep, std::chrono::seconds(2));
    seen.push_back(sleep.count());
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{4000, 8000, 16000, 32000, 50000, 50000}));
  // 20 wake-ups a second once idle, 500 while busy.
  EXPECT_EQ(std::chrono::seconds(1) / PollBackoff::kIdleCap, 20);
  EXPECT_EQ(std::chrono::seconds(1) / PollBackoff::kBusyCap, 500);
}

}  // namespace
}  // namespace scalebench
