#include "common/cell/cell_outcome.h"

#include "common/cell/messages.h"

namespace scalebench {

CellOutcome cell_outcome(const std::vector<RankResult>& results) {
  // The rank that failed first decides; the others of its group report phase `group`
  // (Note [Group agreement]), which is only the echo of it.
  const RankResult* decisive = nullptr;
  for (const auto& result : results) {
    if (result.status == CellStatus::kOk) continue;
    if (decisive == nullptr || (decisive->failed_phase == FailurePhase::kGroup &&
                                result.failed_phase != FailurePhase::kGroup)) {
      decisive = &result;
    }
  }
  if (decisive == nullptr) return {};
  return {decisive->status, decisive->failed_phase,
          "rank " + std::to_string(decisive->world_rank) + ": " + decisive->reason};
}

}  // namespace scalebench
