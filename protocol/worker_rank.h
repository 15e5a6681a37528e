// The main of a worker rank (world rank != 0) of `scalebench run`: the worker side of
// Note [Orchestrator protocol] from the hello to the final exit-status broadcast.
#pragma once

#include "common/base/logging.h"
#include "protocol/cell_runner.h"
#include "protocol/worker_factory.h"

namespace scalebench {

/// Makes the CellRunner, sends the hello, waits for rank 0's go/no-go, then serves cells
/// until shutdown and takes part in the exit-status broadcast. `log` configures this rank's
/// log (its file under log.log_dir) once rank 0 said go. Stop signals are ignored here
/// (rank 0 decides; see Note [Stop signals]). A scalebench Error outside a cell aborts the
/// job with kExitInfrastructure. Returns the job's exit status.
int run_worker_rank(const WorkerFactory& worker, const WorkerContext& context,
                    const LogOptions& log);

}  // namespace scalebench
