// Process exit statuses of every scalebench command, the only place they are defined
// (docs/user-guide.md#exit-status). Code returns these names, never a literal.
#pragma once

namespace scalebench {

inline constexpr int kExitOk = 0;              ///< everything asked for succeeded
inline constexpr int kExitCellsFailed = 1;     ///< some cells failed / a regression was found
inline constexpr int kExitBadInput = 2;        ///< bad input; nothing ran or was written
inline constexpr int kExitInterrupted = 3;     ///< stopped by a signal; `--resume` continues
inline constexpr int kExitInfrastructure = 4;  ///< MPI, HDF5, a dead or hung rank
/// A worker rank that ended itself past its cell's deadline, rank 0 unreachable (Note
/// [Worker deadline] in protocol/worker_loop.h); 124 as timeout(1) exits.
inline constexpr int kExitWorkerDeadline = 124;

}  // namespace scalebench
