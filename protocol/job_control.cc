#include "protocol/job_control.h"

#include <mpi.h>

#include <cstdlib>
#include <iostream>

#include "common/base/logging.h"
#include "protocol/launcher_guard.h"
#include "protocol/mpi_check.h"

namespace scalebench {

int broadcast_status(int status) {
  MPI_CHECK(MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD));
  return status;
}

void abort_job(const std::string& message, int status) {
  // One line on stderr: through the console sink when there is one, else directly.
  SB_LOG(fatal) << message << " (exit status " << status << ")";
  if (!logging_to_console()) {
    std::cerr << "scalebench: " << message << " (exit status " << status << ")" << std::endl;
  }
  guard_launcher_end("MPI_Abort");  // Note [Launcher guard]: mpirun may wait on a lost node
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);
}

}  // namespace scalebench
