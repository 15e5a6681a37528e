// A program cell on one worker rank: the user's command as a child process, its report
// channel read, its ranks kept together (docs/programs.md).
#pragma once

#include <mpi.h>

#include <memory>
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

/// The runner of a worker rank: program cells (`program:` set) run through run_program_cell,
/// every other cell through `builtin` (the LibTorch runner in the executable, a fake one in
/// tests). The device of a program cell is `cuda` when the cell asks for it, or when it says
/// `auto` and `builtin` reports a GPU. Keeps CellRunner's contract.
std::unique_ptr<CellRunner> with_program_cells(std::unique_ptr<CellRunner> builtin);

}  // namespace scalebench
