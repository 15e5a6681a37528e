#include "protocol/program/program_run.h"

#include <algorithm>
#include <chrono>

#include "common/base/escaped_text.h"
#include "common/base/process_memory.h"
#include "common/cell/messages.h"
#include "protocol/mpi_check.h"
#include "protocol/program/report_pipe.h"

namespace scalebench::program {

namespace {

constexpr std::size_t kTailLines = 40;
constexpr std::size_t kTailBytes = 4096;
/// Note [Program memory budget]: how often the resident set of a program's group is summed.
constexpr std::chrono::milliseconds kRssSampleInterval{200};

}  // namespace

/// Runs the program to its end, reading its records as they come; ends it early on a
/// malformed record, a kProgramStop from the group, or at `timeout_s` (the cell's limit, as
/// for every cell: the worker ends the program before rank 0's watchdog, which allows
/// timeout_s + its grace, gives up on the cell). Throws SubprocessError when it cannot be
/// started.
ProgramRun run_and_read(SubprocessOptions options, MPI_Comm group, double timeout_s,
                        double rss_budget_bytes) {
  ProgramRun run;
  std::string buffer;
  ReportPipe pipe;
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
      pipe.drain(buffer);
      apply_records(run.report, buffer);
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
  Subprocess child(options);
  child_group = child.pid();
  pipe.close_write();  // the child holds the only write end
  run.exit = child.wait();
  pipe.drain(buffer);
  if (run.record_error.empty()) {
    buffer += '\n';  // a last line without its newline still counts
    try {
      apply_records(run.report, buffer);
    } catch (const ProgramRecordError& e) {
      run.record_error = e.what();
    }
  }
  return run;
}

/// The bounded, printable tail of a program's output (stdout and stderr merged).
std::string output_tail(const ProgramRun& run) {
  return printable_output(tail_lines(run.exit.output, kTailLines, kTailBytes));
}

/// The largest memory known of a run: its reported peak, or its group's sampled resident
/// set; -1 when neither.
double measured_peak_bytes(const ProgramRun& run) {
  return std::max(run.report.peak_memory_bytes, run.sampled_peak_rss_bytes);
}

}  // namespace scalebench::program
