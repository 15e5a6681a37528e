// Typed errors shared by every scalebench library.
//
// Contract: every exception scalebench throws derives from scalebench::Error. The
// subclass says how the caller must react:
//   InputError        bad user input (matrix, CLI, files): nothing runs, exit status 2.
//   LibraryError      a library call failed (MPI, HDF5, CUDA, NCCL); carries host,
//                     rank, file:line and the library's own message.
//   CellError         a failure inside one benchmark cell: recorded, the sweep goes on.
//   OutOfMemoryError  a CellError whose status is "oom".
//   FatalError        the job cannot continue (broken communicator, dead rank).
#pragma once

#include <stdexcept>
#include <string>

#include "common/base/cell_status.h"

namespace scalebench {

/// Root of the hierarchy. `what()` is the full human-readable message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// Bad user input. The message names file:line:column, the key and what to change.
class InputError : public Error {
 public:
  using Error::Error;
};

/// The results file could not be updated because its file system is full (or a quota or
/// the file size limit was reached). One line: path, free space, what was kept, what to do.
class NoSpaceError : public Error {
 public:
  using Error::Error;
};

/// A failed library call. Built by the *_CHECK macros through `format_library_error`.
class LibraryError : public Error {
 public:
  LibraryError(const std::string& library, const std::string& message)
      : Error(message), library_(library) {}
  [[nodiscard]] const std::string& library() const { return library_; }

 private:
  std::string library_;
};

class MpiError : public LibraryError {
 public:
  explicit MpiError(const std::string& message) : LibraryError("MPI", message) {}
};
class Hdf5Error : public LibraryError {
 public:
  explicit Hdf5Error(const std::string& message) : LibraryError("HDF5", message) {}
};
class CudaError : public LibraryError {
 public:
  explicit CudaError(const std::string& message) : LibraryError("CUDA", message) {}
};
class NcclError : public LibraryError {
 public:
  explicit NcclError(const std::string& message) : LibraryError("NCCL", message) {}
};

/// A failure inside one cell. `phase` is where it happened (common/cell/cell_outcome.h).
class CellError : public Error {
 public:
  CellError(FailurePhase phase, const std::string& message) : Error(message), phase_(phase) {}
  [[nodiscard]] FailurePhase phase() const { return phase_; }

 private:
  FailurePhase phase_;
};

class OutOfMemoryError : public CellError {
 public:
  using CellError::CellError;
};

/// The job cannot go on; the message says why and what to do.
class FatalError : public Error {
 public:
  using Error::Error;
};

/// "host=<h> rank=<r> <file>:<line>: <library> error: <detail>: <reason>" — the one
/// format of library errors. Rank is the MPI_COMM_WORLD rank, or -1 before MPI_Init.
std::string format_library_error(const std::string& library, const char* file, int line,
                                 const std::string& detail, const std::string& reason);

/// This machine's hostname (empty string if it cannot be read).
std::string hostname();

/// MPI_COMM_WORLD rank of this process, or -1 when MPI is not initialised.
int world_rank_or_minus_one();

}  // namespace scalebench
