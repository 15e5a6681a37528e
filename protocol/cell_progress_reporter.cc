#include "protocol/cell_progress_reporter.h"

#include <mpi.h>

#include <cstdlib>
#include <utility>

#include "protocol/mpi_comm.h"
#include "protocol/wire.h"

namespace scalebench {

double progress_interval_s() {
  const char* text = std::getenv("SCALEBENCH_PROGRESS_INTERVAL");
  if (text == nullptr || *text == '\0') return kProgressInterval;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  return end != text && *end == '\0' && value > 0 ? value : kProgressInterval;
}

CellProgressReporter::CellProgressReporter(std::string cell_id, bool reporting,
                                           Clock::duration interval)
    : cell_id_(std::move(cell_id)),
      reporting_(reporting),
      interval_(interval),
      next_(Clock::now() + interval) {}

void CellProgressReporter::report(const char* stage, int64_t done, int64_t total) {
  if (!reporting_) return;
  const auto now = Clock::now();
  if (now < next_) return;
  next_ = now + interval_;
  // A small message: MPI sends it eagerly, so the loop does not wait for rank 0.
  send_message(serialize(CellProgress{cell_id_, stage, done, total}), 0, Tag::kProgress,
               MPI_COMM_WORLD);
  ++sent_;
}

}  // namespace scalebench
