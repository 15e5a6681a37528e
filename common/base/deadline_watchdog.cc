#include "common/base/deadline_watchdog.h"

#include <utility>

namespace scalebench {

DeadlineWatchdog::DeadlineWatchdog(Clock::time_point deadline, std::function<void()> action)
    : thread_([this, deadline, action = std::move(action)] {
        std::unique_lock<std::mutex> lock(mutex_);
        if (wake_.wait_until(lock, deadline, [this] { return stopping_; })) return;
        fired_ = true;
        lock.unlock();  // the action may take long (an abort): do not hold up the destructor
        action();
      }) {}

DeadlineWatchdog::~DeadlineWatchdog() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool DeadlineWatchdog::fired() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return fired_;
}

}  // namespace scalebench
