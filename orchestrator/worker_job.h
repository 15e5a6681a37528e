// The shape shared by `probe` and `selftest`: every worker rank (1..N) takes part in one
// collective job on their own communicator, worker 0 hands the outcome to rank 0 as text,
// rank 0 reports it and every rank exits with rank 0's status.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

#include "protocol/cell_runner.h"

namespace scalebench {

/// Starts MPI when needed, sets up logging (console on rank 0) and refuses fewer than 2
/// ranks with an InputError that names `command` and `usage`. On the workers, `work` runs
/// on their communicator (a thrown exception is its failure, as text); on rank 0, `report`
/// gets (worked, text) from worker 0 and returns the exit status, which every rank returns.
int run_worker_job(const std::string& command, const std::string& usage,
                   const std::function<std::string(MPI_Comm workers, const WorkerContext&)>& work,
                   const std::function<int(bool worked, const std::string& text)>& report);

}  // namespace scalebench
