// Rank 0 of `scalebench run`: schedules cells onto worker groups and records results.
//
// The sequence of messages is Note [Orchestrator protocol] in protocol/wire.h.
//
// Note [Late cells]
// ~~~~~~~~~~~~~~~~~
// A cell with no complete result `timeout_s + watchdog_grace_s` after dispatch is recorded
// as `timeout` at once (flushed), but its ranks stay reserved: rank 0 cannot tell a rank
// that is still computing a long iteration (workers check the cell's deadline only between
// iterations) from one stuck in a collective. If the ranks come back within
// `hang_limit_s` more, the cell stays `timeout` (its late results are not stored), the
// ranks are freed and the sweep goes on. If not, they are taken as hung and the job ends
// (MPI_Abort, status 4), with a message naming the cell and --resume: a hung collective on
// the CPU/MPI path cannot be cancelled. A RankResult with `fatal` set (FatalError on a worker)
// records the cell as failed and ends the job the same way.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/base/exit_status.h"
#include "common/cell/cell_spec.h"
#include "common/cell/messages.h"
#include "orchestrator/adaptive_rounds.h"
#include "orchestrator/run_options.h"

namespace scalebench {

/// Where rank 0 records cells: the results store through a writer thread in production
/// (GroupCommitSink, Note [Group commit]), memory in tests. Records are kept in call order;
/// a record is durable when flush() returns (an implementation may commit earlier). A
/// record call may throw the failure of an earlier commit.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  /// Returns when every earlier record is durable; throws what a failed commit threw.
  virtual void flush() {}
  virtual void mark_running(const CellSpec& cell, const std::vector<int>& ranks) = 0;
  virtual void mark_skipped(const CellSpec& cell, const std::string& reason) = 0;
  /// All ranks reported; `results` in group-rank order. The cell's status follows from
  /// the ranks' statuses (see cell_outcome).
  virtual void complete(const CellSpec& cell, const std::vector<RankResult>& results) = 0;
  /// No (complete) results: timeout seen by the watchdog, interrupted, fatal.
  virtual void finish_without_results(const CellSpec& cell, CellStatus status, FailurePhase phase,
                                      const std::string& reason) = 0;
  /// Note [Cell progress]: where the running `cell` is.
  virtual void progress(const CellSpec& cell, const CellProgress& progress) = 0;
};

/// What a resume does with a cell whose stored status is `stored` (nullopt: not in the
/// file): true = run it. ok: no; failed/oom/timeout: only with retry_failed;
/// running/interrupted/skipped or absent: yes. Pure.
bool should_run_on_resume(std::optional<CellStatus> stored, bool retry_failed);

/// Rank 0: receives one WorkerHello from each of ranks 1..world_size-1, by world rank.
/// Throws FatalError naming the silent ranks when they have not all reported within
/// `limit_s` seconds (<= 0: wait for ever).
std::vector<WorkerHello> collect_hellos(int world_size, double limit_s);

/// Rank 0: Tag::kShutdown to ranks 1..world_size-1.
void shutdown_workers(int world_size);

struct OrchestratorOptions {
  SchedulingMode scheduling = SchedulingMode::kExclusive;
  bool fail_fast = false;
  double watchdog_grace_s = 5.0;
  /// Seconds rank 0 still waits for a timed-out cell's ranks before it ends the job (Note
  /// [Late cells]); RunOptions::hang_limit_s.
  double hang_limit_s = 300.0;
  /// Cells of the matrix already final in the results file (resume), for progress only.
  size_t already_done = 0;
  /// Cells of the whole matrix (progress total); 0 = cells.size() + already_done.
  size_t total_cells = 0;
  /// Called at dispatch, before the cell is marked running, to fill the Assignment's
  /// `artifact` and `tree` (CellInputs::attach in production; unset: neither is sent). A
  /// CellError from it records the cell `failed` in the error's phase, and the run goes on.
  std::function<void(const CellSpec&, Assignment&)> attach_inputs;
  /// Note [Adaptive repetitions] (orchestrator/adaptive_rounds.h): a look before adaptive
  /// round `round` (the file is durable when it is called); unset: every round runs. A throw
  /// is logged and the round runs (more runs, never a verdict the analysis did not make).
  std::function<AdaptiveLook(int64_t round)> look;
};

/// How the loop ended.
struct OrchestratorOutcome {
  std::map<CellStatus, size_t> counts;  ///< final statuses of the cells this run touched
  bool interrupted = false;             ///< a stop signal or --fail-fast left cells not run
  size_t not_started = 0;               ///< cells left pending (stop or fail-fast)
  /// Set when the job must end now with MPI_Abort (watchdog timeout, fatal worker error,
  /// second stop signal): workers may be stuck in a collective and cannot be shut down.
  std::optional<std::string> abort_message;
  int abort_status = kExitInfrastructure;
};

/// Rank 0's loop: runs `cells` on `workers` per Note [Orchestrator protocol] (protocol/wire.h),
/// recording every cell through `sink` (cells too big for the job are recorded `skipped`). Does not
/// send Tag::kShutdown (the caller does, unless abort_message is set). Reacts to
/// StopSignalHandler's counter, which the caller installs.
OrchestratorOutcome run_orchestrator(const std::vector<CellSpec>& cells,
                                     const std::vector<WorkerHello>& workers, ResultSink& sink,
                                     const OrchestratorOptions& options);

}  // namespace scalebench
