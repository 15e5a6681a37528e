// How a rank that polls for MPI messages sleeps between polls.
//
// Note [Polling back-off]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Rank 0 and the workers poll (MPI_Iprobe) instead of blocking in MPI_Recv, because Open MPI
// busy-waits inside a blocking receive and would take a core from the cells. Between polls
// they sleep: 50 us after activity, doubling to 200 us for the first 50 ms (the answer to a
// message just sent, such as the next assignment after a result, usually comes within
// milliseconds: a sweep of short cells sees it within 0.2 ms), then on to 2 ms, so that a
// message that follows soon after the last one is seen within about a millisecond. Once
// nothing has arrived for 1 s (a worker left idle by the schedule, rank 0
// waiting on a long cell) the sleep grows on to 50 ms: 20 wake-ups a second instead of 500,
// for at most 50 ms more latency on a message that ends a wait of more than a second.
#pragma once

#include <chrono>

namespace scalebench {

class PollBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds kFirst{50};
  static constexpr std::chrono::microseconds kEagerCap{200};
  static constexpr std::chrono::milliseconds kEagerFor{50};
  static constexpr std::chrono::microseconds kBusyCap{2000};
  static constexpr std::chrono::microseconds kIdleCap{50000};
  static constexpr std::chrono::seconds kIdleAfter{1};

  /// The sleep after `current` when the last activity was `idle_for` ago. Pure.
  static std::chrono::microseconds next(std::chrono::microseconds current,
                                        Clock::duration idle_for);

  /// Something arrived: poll eagerly again.
  void reset();
  /// Sleeps the current interval, then lengthens it.
  void wait();

 private:
  std::chrono::microseconds sleep_ = kFirst;
  Clock::time_point last_activity_ = Clock::now();
};

}  // namespace scalebench
