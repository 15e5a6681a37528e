// Progress of a run on rank 0: cells done / failed / total and an ETA.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "common/cell/messages.h"

namespace scalebench {

/// Remaining time estimated from this run's throughput of cells:
/// elapsed_s / finished * remaining (works for exclusive and packed alike). nullopt
/// before the first cell finished. Pure.
std::optional<double> estimate_eta_s(double elapsed_s, size_t finished_this_run, size_t remaining);

/// "1h02m", "3m05s", "42s" (rounded to whole seconds). Pure.
std::string format_duration(double seconds);

/// Counts of one run. `total` covers every cell of the matrix, including those a
/// --resume found finished (`already_done`). Not thread-safe.
class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  Progress(size_t total, size_t already_done, Clock::time_point start = Clock::now());

  /// Records one cell of this run reaching a final status (failed/oom/timeout count as failed).
  void cell_finished(CellStatus status);

  [[nodiscard]] size_t done() const { return already_done_ + finished_; }
  [[nodiscard]] size_t failed() const { return failed_; }
  [[nodiscard]] size_t total() const { return total_; }

  /// "[ 7/12 done, 1 failed] ETA 3m05s" as of `now`.
  [[nodiscard]] std::string line(Clock::time_point now = Clock::now()) const;

 private:
  size_t total_;
  size_t already_done_;
  size_t finished_ = 0;
  size_t failed_ = 0;
  Clock::time_point start_;
};

}  // namespace scalebench
