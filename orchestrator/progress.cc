#include "orchestrator/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace scalebench {

std::optional<double> estimate_eta_s(double elapsed_s, size_t finished_this_run, size_t remaining) {
  if (remaining == 0) return 0.0;
  if (finished_this_run == 0 || elapsed_s < 0) return std::nullopt;
  return elapsed_s / static_cast<double>(finished_this_run) * static_cast<double>(remaining);
}

std::string format_duration(double seconds) {
  const auto total = static_cast<long long>(std::llround(std::max(seconds, 0.0)));
  const long long hours = total / 3600;
  const long long minutes = (total % 3600) / 60;
  const long long secs = total % 60;
  char text[48];
  if (hours > 0) {
    std::snprintf(text, sizeof text, "%lldh%02lldm", hours, minutes);
  } else if (minutes > 0) {
    std::snprintf(text, sizeof text, "%lldm%02llds", minutes, secs);
  } else {
    std::snprintf(text, sizeof text, "%llds", secs);
  }
  return text;
}

Progress::Progress(size_t total, size_t already_done, Clock::time_point start)
    : total_(total), already_done_(already_done), start_(start) {}

void Progress::cell_finished(CellStatus status) {
  ++finished_;
  if (status == CellStatus::kFailed || status == CellStatus::kOom ||
      status == CellStatus::kTimeout) {
    ++failed_;
  }
}

std::string Progress::line(Clock::time_point now) const {
  const double elapsed_s = std::chrono::duration<double>(now - start_).count();
  const size_t remaining = total_ > done() ? total_ - done() : 0;
  const auto eta_s = estimate_eta_s(elapsed_s, finished_, remaining);
  const std::string width = std::to_string(std::to_string(total_).size());
  char counts[96];
  std::snprintf(counts, sizeof counts, ("[%" + width + "zu/%zu done, %zu failed]").c_str(), done(),
                total_, failed_);
  return std::string(counts) + " ETA " + (eta_s ? format_duration(*eta_s) : std::string("?"));
}

}  // namespace scalebench
