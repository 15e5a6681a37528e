// How a program cell's run ended on this rank, the group told of failures (Note [Program
// cells]), and the rank's result filled from what the program reported.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "common/cell/messages.h"
#include "program/program_run.h"
#include "program/torchrun_layout.h"

namespace scalebench::program {

/// What ended this rank's program, before the group is told.
struct LocalOutcome {
  CellStatus status = CellStatus::kOk;
  FailurePhase phase = FailurePhase::kNone;
  std::string reason;
  bool sends_stop = false;   ///< its own failure (not an echo of another rank's)
  bool over_budget = false;  ///< the memory budget ended it (Note [Program memory budget])
};

/// What ended this rank's program, in the order of Note [Program cells]'s failures table
/// (docs/programs.md#failures).
LocalOutcome outcome_of(const ProgramRun& run, const std::vector<std::string>& argv,
                        const TorchrunLayout& layout, double timeout_s, double budget_bytes);

/// Note [Program cells]: every rank whose own program failed tells the others; returns how
/// many did, after receiving exactly the stops meant for this rank (none outlives the cell).
int exchange_stops(bool sends_stop, MPI_Comm group, const TorchrunLayout& layout);

/// The rank's timings, metrics and effective values from what its program reported.
void record_report(RankResult& result, const ProgramRun& run, const CellSpec& cell,
                   double origin_s);

}  // namespace scalebench::program
