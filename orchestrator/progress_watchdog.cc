#include "orchestrator/progress_watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "common/base/exit_status.h"
#include "protocol/launcher_guard.h"

namespace scalebench {

ProgressWatchdog::ProgressWatchdog(double limit_s) : limit_s_(limit_s), last_beat_ns_(now_ns()) {
  if (limit_s_ > 0) thread_ = std::thread([this] { watch(); });
}

ProgressWatchdog::~ProgressWatchdog() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProgressWatchdog::watch() {
  const auto limit_ns = static_cast<long long>(limit_s_ * 1e9);
  const auto period = std::chrono::milliseconds(
      std::clamp(static_cast<long long>(limit_s_ * 1000 / 10), 10LL, 1000LL));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    const long long silent_ns = now_ns() - last_beat_ns_.load(std::memory_order_relaxed);
    if (silent_ns < limit_ns) continue;
    // write(2) and _exit: the main thread is stuck, possibly holding locks of iostreams,
    // the logger or MPI; nothing here may take them.
    const std::string line =
        "scalebench: rank 0 made no progress for " + std::to_string(silent_ns / 1000000000) +
        " s (--hang-limit " + std::to_string(limit_s_) +
        "): it is stuck (in a collective or a file system call), so the job ends here. Every "
        "finished cell is saved; run the same command with --resume to run the remaining "
        "cells (exit status " +
        std::to_string(kExitInfrastructure) + ")\n";
    (void)!write(STDERR_FILENO, line.data(), line.size());
    guard_launcher_end("rank 0 stuck");  // Note [Launcher guard]
    _exit(kExitInfrastructure);
  }
}

}  // namespace scalebench
