// A thread that runs an action once, at a deadline, unless it is destroyed first.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace scalebench {

class DeadlineWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  /// Starts the thread: `action` runs on it at `deadline` (at once if that has passed)
  /// unless the watchdog is destroyed before. `action` must be safe to call from another
  /// thread than the one that owns what it touches, and must not throw.
  DeadlineWatchdog(Clock::time_point deadline, std::function<void()> action);
  ~DeadlineWatchdog();  ///< cancels the action if it has not run, joins the thread
  DeadlineWatchdog(const DeadlineWatchdog&) = delete;
  DeadlineWatchdog& operator=(const DeadlineWatchdog&) = delete;

  /// Whether the action ran.
  [[nodiscard]] bool fired() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool fired_ = false;
  std::thread thread_;
};

}  // namespace scalebench
