// A program cell on one worker rank: the user's command as a child process, its report
// channel read, its ranks kept together (docs/programs.md).
#pragma once

#include <mpi.h>

#include <string>

#include "common/cell/messages.h"
#include "protocol/cell_runner.h"

namespace scalebench {

/// Runs `assignment.cell.program` on this rank and returns the rank's result (Note [Program
/// cells]). Every rank of `group` calls it; it never throws for a failure of the program or
/// of its report (they are the result's status, phase and reason), only FatalError when the
/// group communicator fails. `device` is "cpu" or "cuda" (the child then sees only GPU
/// `context.local_index`). Creates no CUDA context and no NCCL communicator.
RankResult run_program_cell(const Assignment& assignment, MPI_Comm group,
                            const WorkerContext& context, const std::string& device);

}  // namespace scalebench
