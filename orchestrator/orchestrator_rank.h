// The main of rank 0 of `scalebench run`: the orchestrator side of Note [Orchestrator
// protocol], from the workers' hellos to the exit-status broadcast.
#pragma once

#include "orchestrator/run_options.h"
#include "protocol/worker_factory.h"

namespace scalebench {

/// Collects the hellos, prepares the run (prepare_run; bad input is broadcast as a no-go
/// and returned), runs the prepare steps and the cells, writes the end time, prints the
/// summary table and broadcasts the exit status. A results or MPI failure aborts the job
/// (kExitInfrastructure). Returns the job's exit status (common/base/exit_status.h).
int run_orchestrator_rank(const RunOptions& options, const WorkerFactory& worker);

}  // namespace scalebench
