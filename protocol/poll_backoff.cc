#include "protocol/poll_backoff.h"

#include <algorithm>
#include <thread>

namespace scalebench {

std::chrono::microseconds PollBackoff::next(std::chrono::microseconds current,
                                            Clock::duration idle_for) {
  const auto cap = idle_for >= kIdleAfter ? kIdleCap : idle_for >= kEagerFor ? kBusyCap : kEagerCap;
  return std::min(std::max(current * 2, kFirst), cap);
}

void PollBackoff::reset() {
  sleep_ = kFirst;
  last_activity_ = Clock::now();
}

void PollBackoff::wait() {
  std::this_thread::sleep_for(sleep_);
  sleep_ = next(sleep_, Clock::now() - last_activity_);
}

}  // namespace scalebench
