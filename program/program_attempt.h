// One launch of a program cell's program on every rank of its group, with the group's
// agreement on how it ended (Note [Program cells]).
#pragma once

#include <mpi.h>

#include <filesystem>
#include <string>
#include <vector>

#include "program/program_outcome.h"
#include "protocol/cell_runner.h"

namespace scalebench::program {

/// One launch of the program on this rank, with the group's agreement on how it ended.
struct Attempt {
  ProgramRun run;
  LocalOutcome local;
  std::vector<std::string> argv;
  double origin_s = 0;  ///< Note [Shared cell clock]: the group's barrier before the launch
  double origin_epoch_s = 0;
};

/// Launches `assignment`'s program (its cell's batch and iterations) on every rank of the
/// group and waits for all of them: a rank whose program fails makes the others end theirs
/// (Note [Program cells]). Collective over `group`.
Attempt attempt_program(const Assignment& assignment, const TorchrunLayout& layout,
                        const WorkerContext& context, const std::string& device,
                        const std::filesystem::path& output_dir, double budget_bytes,
                        double timeout_s, MPI_Comm group);

}  // namespace scalebench::program
