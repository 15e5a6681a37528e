// `repetitions: auto`: which repetitions of a run still need to run. Pure (no MPI, no file):
// the orchestrator's loop asks it what to schedule and tells it what finished; the decision
// itself is the analysis's (`python -m scalebench_analysis decide`).
//
// Note [Adaptive repetitions]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A cell with `repetitions: auto` is expanded into max_repetitions runs (repetition 0..cap-1,
// adaptive_repetitions set), dispatched in the interleaved rounds of Note [Rounds]. Rounds
// 0..kMinAdaptiveRounds-1 are scheduled at once. Round r >= kMinAdaptiveRounds is held until
// every adaptive run of the earlier rounds has finished (recorded); then the orchestrator
// makes the results file durable and asks the analysis which series are still undecided
// (a look: every compared pair of the series judged with the sequential test's share of
// alpha for this look, docs/repetitions.md#repetitions-auto). Round r is then released for
// the undecided series only; every remaining run of a decided series is recorded `skipped`
// with the reason ("repetitions auto: decided after k runs"), so the file says why it has
// fewer runs than max_repetitions and a --resume does not run them again blindly (it asks
// again). No round starts after repetitions_budget_s of the run; its runs are skipped with
// that reason. Cells without adaptive_repetitions are scheduled at once, as before.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/cell/cell_spec.h"

namespace scalebench {

/// Rounds of an adaptive series that always run before the first look.
inline constexpr int64_t kMinAdaptiveRounds = 3;

/// What a look tells: the series (series_id) still undecided, and each decided one's verdict.
struct AdaptiveLook {
  std::set<std::string> undecided;
  std::string summary;  ///< one line for the log ("3 of 4 series decided after 3 runs")
};

/// The gate of Note [Adaptive repetitions] over `cells` (the run's cells, in dispatch order;
/// the indexes below are into it). Not thread-safe (rank 0's loop).
class AdaptiveRounds {
 public:
  explicit AdaptiveRounds(const std::vector<CellSpec>& cells);

  /// The indexes to schedule at once: every cell that is not adaptive or is of a round below
  /// kMinAdaptiveRounds, in order.
  [[nodiscard]] std::vector<size_t> initial() const { return initial_; }
  /// Cell `index` finished (any status), or will never run (unschedulable, a duplicate).
  void finished(size_t index);
  /// Every held run, forgotten (the run stops); returns how many there were.
  size_t drop_held();
  /// The series of the held runs (a look without an analysis: all undecided).
  [[nodiscard]] std::set<std::string> held_series() const;
  /// The next held round when every adaptive run of the earlier rounds has finished and a look
  /// is due; -1 when none (nothing held, or earlier runs still pending or running).
  [[nodiscard]] int64_t round_ready() const;
  /// The look's outcome for round `round`: the indexes to schedule (its runs of undecided
  /// series), and in `retired` every held run of a decided series (all rounds), or of every
  /// series when `out_of_budget`, to be recorded skipped with `reason_of(index)`.
  std::vector<size_t> release(int64_t round, const AdaptiveLook& look, bool out_of_budget,
                              std::vector<size_t>& retired);
  /// Why held run `index` was retired, for its `skipped` record.
  [[nodiscard]] std::string reason_of(size_t index) const;
  /// Adaptive cells held: a look is needed before the run ends.
  [[nodiscard]] bool holding() const { return !held_.empty(); }
  /// The smallest repetitions_budget_s of the held cells (0: none).
  [[nodiscard]] double budget_s() const;

 private:
  const std::vector<CellSpec>& cells_;
  std::vector<size_t> initial_;
  std::set<size_t> held_;         ///< adaptive runs of rounds >= kMinAdaptiveRounds, not released
  std::set<size_t> outstanding_;  ///< released adaptive runs not yet finished
  std::vector<std::string> reasons_;  ///< per index: why retired ("" when not)
};

}  // namespace scalebench
