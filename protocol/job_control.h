// The job-wide steps every rank of `scalebench run` shares: the go/no-go and exit-status
// broadcasts of Note [Orchestrator protocol] (steps 3 and 7) and the job abort.
#pragma once

#include <string>

namespace scalebench {

/// MPI_Bcast of `status` from rank 0 over MPI_COMM_WORLD; every rank calls it. Returns
/// rank 0's value.
int broadcast_status(int status);

/// Logs `message`, prints it with the status on stderr and ends the whole MPI job with
/// `status` (MPI_Abort), with a guard that ends the launcher if a node's daemon keeps it
/// waiting (Note [Launcher guard] in protocol/launcher_guard.h). Never returns.
[[noreturn]] void abort_job(const std::string& message, int status);

}  // namespace scalebench
