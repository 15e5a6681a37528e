// Rank 0 of `scalebench run`, before any cell: resolve the matrix (worktrees included),
// open or create the results file and choose the cells to run.
#pragma once

#include <optional>
#include <vector>

#include "common/cell/messages.h"
#include "matrix/resolved_matrix.h"
#include "orchestrator/run_options.h"
#include "protocol/worker_factory.h"
#include "results/lock.h"
#include "results/store.h"

namespace scalebench {

/// Rank 0's state after the input checks: what to run and where to write.
struct PreparedRun {
  std::optional<ResolvedMatrix> matrix;  ///< set by prepare_run
  std::vector<CellSpec> to_run;          ///< in matrix order
  size_t already_done = 0;               ///< final cells of a resumed file
  SchedulingMode scheduling = SchedulingMode::kExclusive;
  /// Held from before the results file is created or opened until the job ends (declared
  /// before `store`, so released after it). See Note [One writer per results file].
  std::optional<ResultsLock> lock;
  std::optional<ResultsStore> store;
};

/// Checks the paths of `options` (check_run_paths), takes the results file's lock (see
/// Note [One writer per results file]), resolves the matrix (resolve_matrix with the run's
/// work dir), then creates the results file (provenance from `options`, the workers'
/// `hellos` and `worker`'s library versions) or, with --resume, opens it and keeps the
/// cells should_run_on_resume selects. Throws InputError for bad input (nothing has run,
/// nothing written; a job that holds the lock is bad input too), Error otherwise.
/// InputError for paths a run must refuse before it reads or writes anything: a --log-dir
/// that cannot hold the logs of `ranks` ranks (check_log_dir), an -o that is a directory,
/// an -o that is the matrix file itself (even with --force).
void check_run_paths(const RunOptions& options, int ranks);

PreparedRun prepare_run(const RunOptions& options, const std::vector<WorkerHello>& hellos,
                        const WorkerFactory& worker);

}  // namespace scalebench
