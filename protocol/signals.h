// Stop signals (SIGTERM, SIGUSR1, SIGINT) for a run.
//
// Note [Stop signals]
// ~~~~~~~~~~~~~~~~~~~
// Slurm delivers SIGTERM (at the end of the time limit or on scancel) and, with
// `--signal=USR1@<s>`, SIGUSR1 before it; srun delivers them to every task. Only rank 0
// reacts: its handler just stores the signal number in a `volatile sig_atomic_t` (the
// only async-signal-safe thing to do) and rank 0's loop polls it, stops dispatching,
// waits for the running cells, flushes and exits with status 3. Workers ignore these
// signals (SIG_IGN), so a signal sent to all tasks does not kill a worker in the middle
// of a cell; rank 0 ends them with Tag::kShutdown. A second signal to rank 0 records the
// running cells as `interrupted` and ends the job at once (MPI_Abort, status 3).
#pragma once

#include <csignal>

namespace scalebench {

/// Installs the flag-setting handler on rank 0 for SIGTERM, SIGUSR1 and SIGINT; restores
/// the previous dispositions on destruction. One instance at a time per process.
class StopSignalHandler {
 public:
  StopSignalHandler();
  ~StopSignalHandler();
  StopSignalHandler(const StopSignalHandler&) = delete;
  StopSignalHandler& operator=(const StopSignalHandler&) = delete;

  /// Number of stop signals received since construction (async-signal-safe counter).
  [[nodiscard]] static int count();
  /// The last stop signal received, 0 if none.
  [[nodiscard]] static int last_signal();

 private:
  struct sigaction previous_[3]{};
};

/// Workers: ignore SIGTERM, SIGUSR1 and SIGINT while alive (restored on destruction).
class IgnoreStopSignals {
 public:
  IgnoreStopSignals();
  ~IgnoreStopSignals();
  IgnoreStopSignals(const IgnoreStopSignals&) = delete;
  IgnoreStopSignals& operator=(const IgnoreStopSignals&) = delete;

 private:
  struct sigaction previous_[3]{};
};

}  // namespace scalebench
