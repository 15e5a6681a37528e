// Note [Cell progress]: a long cell's group rank 0 tells rank 0 where it is, at a bounded
// rate, so that `scalebench watch` and rank 0's log show "iteration k of n" while it runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/cell/messages.h"

namespace scalebench {

/// Seconds between progress messages: kProgressInterval, or the environment variable
/// SCALEBENCH_PROGRESS_INTERVAL (seconds, > 0) when it is set to a number.
double progress_interval_s();

/// Sends CellProgress messages (Tag::kProgress) of one cell to world rank 0, at most one
/// per `interval` and none before `interval` has passed since construction (a short cell
/// sends nothing). Only the group's rank 0 reports (`reporting` false on the others: every
/// call is then a no-op). Not thread-safe.
class CellProgressReporter {
 public:
  using Clock = std::chrono::steady_clock;
  CellProgressReporter(std::string cell_id, bool reporting,
                       Clock::duration interval = std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(progress_interval_s())));

  /// This rank finished `done` of `total` iterations of `stage`: sends when due.
  void report(const char* stage, int64_t done, int64_t total);

  /// Messages sent so far.
  [[nodiscard]] int sent() const { return sent_; }

 private:
  std::string cell_id_;
  bool reporting_;
  Clock::duration interval_;
  Clock::time_point next_;
  int sent_ = 0;
};

}  // namespace scalebench
