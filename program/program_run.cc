#include "program/program_run.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "common/base/escaped_text.h"
#include "common/base/process_memory.h"
#include "program/report_pipe.h"
#include "protocol/mpi_check.h"
#include "protocol/wire.h"

namespace scalebench::program {

namespace {

constexpr std::size_t kTailLines = 40;
constexpr std::size_t kTailBytes = 4096;
/// Note [Program memory budget]: how often the resident set of a program's group is summed.
constexpr std::chrono::milliseconds kRssSampleInterval{200};
/// Note [Program record bounds]: the records read per check while the program runs (the
/// buffer itself never holds more than a record and its newline).
constexpr std::size_t kReadPerCheckBytes = std::size_t{16} * kMaxRecordBytes;

/// The worker's steady clock (CLOCK_MONOTONIC, the client's clock) in nanoseconds.
int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// CLOCK_MONOTONIC's resolution in nanoseconds (at least 1).
int64_t clock_resolution_ns() {
  timespec resolution{};
  if (::clock_getres(CLOCK_MONOTONIC, &resolution) != 0) return 1;
  return std::max<int64_t>(1, int64_t{resolution.tv_sec} * 1'000'000'000 + resolution.tv_nsec);
}

/// Reads `pipe` and applies each complete record to `report`, up to `budget_bytes` (the
/// line being read never past kMaxRecordBytes); the time after each read is the latest any
/// record read so far can hold (Note [Program record bounds]). Throws ProgramRecordError.
void read_records(ReportPipe& pipe, std::string& buffer, ProgramReport& report,
                  RecordBounds& bounds, std::size_t budget_bytes) {
  for (std::size_t read = 0; read < budget_bytes;) {
    const std::size_t n = pipe.drain(buffer, kMaxRecordBytes + 1);
    bounds.read_ns = steady_ns();
    apply_records(report, buffer, bounds);
    if (n == 0) return;
    read += n;
  }
}

}  // namespace

/// Runs the program to its end, reading its records as they come; ends it early on a
/// malformed record, a kProgramStop from the group, or at `timeout_s` (the cell's limit, as
/// for every cell: the worker ends the program before rank 0's watchdog, which allows
/// timeout_s + its grace, gives up on the cell), or beyond `max_steps` step records (Note
/// [Program record bounds]). Throws SubprocessError when it cannot be started.
ProgramRun run_and_read(SubprocessOptions options, MPI_Comm group, double timeout_s,
                        double rss_budget_bytes, int64_t max_steps) {
  ProgramRun run;
  std::string buffer;
  ReportPipe pipe;
  RecordBounds bounds;
  bounds.resolution_ns = clock_resolution_ns();
  bounds.max_steps = max_steps;
  pid_t child_group = 0;
  auto next_sample = std::chrono::steady_clock::now();
  options.pass_fd = pipe.write_fd();
  options.timeout_s = timeout_s;
  options.keep_going = [&]() {
    const auto now = std::chrono::steady_clock::now();
    if (rss_budget_bytes > 0 && child_group > 0 && now >= next_sample) {
      next_sample = now + kRssSampleInterval;  // Note [Program memory budget]
      const auto rss = static_cast<double>(process_group_rss_bytes(child_group));
      run.sampled_peak_rss_bytes = std::max(run.sampled_peak_rss_bytes, rss);
      if (rss > rss_budget_bytes) {
        run.over_budget = true;
        return false;
      }
    }
    try {
      read_records(pipe, buffer, run.report, bounds, kReadPerCheckBytes);
    } catch (const ProgramRecordError& e) {
      run.record_error = e.what();
      return false;
    }
    int waiting = 0;
    MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, static_cast<int>(Tag::kProgramStop), group, &waiting,
                         MPI_STATUS_IGNORE));
    run.peer_failed = waiting != 0;
    return !run.peer_failed;
  };
  bounds.launch_ns = steady_ns();  // no time of the program's can be earlier
  run.launch_s = static_cast<double>(bounds.launch_ns) / 1e9;
  Subprocess child(options);
  child_group = child.pid();
  pipe.close_write();  // the child holds the only write end
  run.exit = child.wait();
  if (run.record_error.empty()) {
    try {
      read_records(pipe, buffer, run.report, bounds, std::numeric_limits<std::size_t>::max());
      buffer += '\n';  // a last line without its newline still counts
      apply_records(run.report, buffer, bounds);
    } catch (const ProgramRecordError& e) {
      run.record_error = e.what();
    }
  }
  return run;
}

/// The bounded, printable tail of a program's output (stdout and stderr merged), then the
/// processes it left behind, which its supervisor ended (Note [Program supervisor]).
std::string output_tail(const ProgramRun& run) {
  std::string tail = printable_output(tail_lines(run.exit.output, kTailLines, kTailBytes));
  const auto& left = run.exit.leftovers;
  if (!left.empty()) {
    if (!tail.empty() && tail.back() != '\n') tail += '\n';
    tail += "[scalebench] the program left " + std::to_string(left.size()) +
            (left.size() == 1 ? " process" : " processes") + " behind, ended with the cell:";
    for (const auto& process : left) tail += "\n  " + process;
  }
  return tail;
}

/// The largest memory known of a run: its reported peak, or its group's sampled resident
/// set; -1 when neither.
double measured_peak_bytes(const ProgramRun& run) {
  return std::max(run.report.peak_memory_bytes, run.sampled_peak_rss_bytes);
}

}  // namespace scalebench::program
