// How a cell ended: its status, the phase in which it failed, and the one rule that turns
// the ranks' results into the cell's outcome (used by rank 0 and by the results store).
#pragma once

#include <string>
#include <vector>

#include "common/base/cell_status.h"

namespace scalebench {

struct RankResult;  // common/cell/messages.h

/// A cell's status, phase and reason from its ranks' results.
struct CellOutcome {
  CellStatus status = CellStatus::kOk;
  FailurePhase failed_phase = FailurePhase::kNone;
  std::string reason;
  bool operator==(const CellOutcome&) const = default;
};

/// ok when every rank is ok; else the first non-ok rank in group-rank order whose phase is
/// not `group` (the echo of another rank's failure), or the first non-ok one, its reason
/// prefixed by "rank <world rank>: ". Pure. The one definition: rank 0 records cells with
/// it and the results store writes complete cells' status with it.
CellOutcome cell_outcome(const std::vector<RankResult>& results);

}  // namespace scalebench
