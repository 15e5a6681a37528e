// MPI_CHECK: the one check macro for MPI calls. Throws scalebench::MpiError with host,
// rank, file:line, MPI's own error string and the failed expression.
//
// MPI's default error handler aborts the job before a return code can be seen;
// `install_mpi_error_returns()` switches MPI_COMM_WORLD to MPI_ERRORS_RETURN so the
// checks below are reachable. Communicators created later inherit the handler.
#pragma once

#include <mpi.h>

#include <string>

#include "common/base/error.h"

namespace scalebench {

/// MPI's text for an error code ("MPI_ERR_COMM: invalid communicator", ...).
std::string mpi_error_string(int code);

/// Sets MPI_ERRORS_RETURN on MPI_COMM_WORLD. Call once right after MPI_Init_thread.
void install_mpi_error_returns();

}  // namespace scalebench

#define MPI_CHECK(expr)                                                                           \
  do {                                                                                            \
    const int scalebench_mpi_rc_ = (expr);                                                        \
    if (scalebench_mpi_rc_ != MPI_SUCCESS) {                                                      \
      throw ::scalebench::MpiError(::scalebench::format_library_error(                            \
          "MPI", __FILE__, __LINE__, #expr, ::scalebench::mpi_error_string(scalebench_mpi_rc_))); \
    }                                                                                             \
  } while (false)
