// One run of a program cell's program on this rank: launched, its records read as they come,
// its resident set sampled against the budget (Note [Program memory budget]), ended early on
// a malformed record, a stop from the group or the cell's time limit.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "common/base/subprocess.h"
#include "program/program_report.h"

namespace scalebench::program {

/// One run of the program and what it reported.
struct ProgramRun {
  ProgramReport report;
  SubprocessResult exit;
  std::string record_error;  ///< a malformed record (Note [Program report channel])
  bool peer_failed = false;  ///< ended because another rank's program failed
  bool over_budget = false;  ///< ended by Note [Program memory budget]'s resident-set check
  double sampled_peak_rss_bytes = -1;  ///< largest resident set of its group seen (-1: none)
  /// steady_clock seconds just before the spawn: with `exit.wall_s`, when the program ended
  /// on the clock of its records (Note [Run-level segments]).
  double launch_s = 0;
};

/// Runs the program to its end, reading its records as they come; ends it early on a
/// malformed record, a kProgramStop from the group, or at `timeout_s` (the cell's limit, as
/// for every cell: the worker ends the program before rank 0's watchdog, which allows
/// timeout_s + its grace, gives up on the cell), or beyond `max_steps` step records (Note
/// [Program record bounds]). Throws SubprocessError when it cannot be started.
ProgramRun run_and_read(SubprocessOptions options, MPI_Comm group, double timeout_s,
                        double rss_budget_bytes, int64_t max_steps);

/// The bounded, printable tail of a program's output (stdout and stderr merged).
std::string output_tail(const ProgramRun& run);

/// The largest memory known of a run: its reported peak, or its group's sampled resident
/// set; -1 when neither.
double measured_peak_bytes(const ProgramRun& run);

}  // namespace scalebench::program
