// Rank 0's own watchdog: ends the job when rank 0's dispatch loop stops making progress.
//
// Note [Rank 0 watchdog]
// ~~~~~~~~~~~~~~~~~~~~~~
// Rank 0's loop never blocks: it polls for results, signals and deadlines (Note [Late
// cells]). If it stops turning anyway (stuck in a collective or a file system call that
// does not return), nothing else would end the job: the workers wait for rank 0 forever
// and a Slurm allocation burns until its time limit. So the loop calls beat() on every
// turn, and a thread ends the process (one line on stderr, _exit with status 4, which makes
// mpirun/srun end the other ranks) when no beat came for `limit_s` seconds (--hang-limit).
// Every finished cell is already durable (Note [Results durability]); --resume continues.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace scalebench {

class ProgressWatchdog {
 public:
  /// Starts the watching thread. limit_s <= 0 disables it.
  explicit ProgressWatchdog(double limit_s);
  ~ProgressWatchdog();  ///< stops and joins the thread
  ProgressWatchdog(const ProgressWatchdog&) = delete;
  ProgressWatchdog& operator=(const ProgressWatchdog&) = delete;

  /// The loop made progress (lock-free; call on every turn).
  void beat() { last_beat_ns_.store(now_ns(), std::memory_order_relaxed); }

 private:
  static long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void watch();

  double limit_s_;
  std::atomic<long long> last_beat_ns_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace scalebench
