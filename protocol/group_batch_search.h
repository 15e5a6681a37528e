// Batch size `auto` on a group: the one search loop of built-in and program cells. Each kind
// gives it "probe one batch on the group" (worker/batch_probe.cc runs the cell's workload;
// program/program_batch_search.cc relaunches the user's program); the loop owns the order of
// the probes (Note [Batch search]), the start moved past a failing min_batch (Note [Batch
// search start] below), the refinement probe inside the safety margin (Note
// [Batch refinement]) and the time the search may take (Note [Search time]). Torch-free.
//
// Note [Search time]
// ~~~~~~~~~~~~~~~~~~
// A search must leave the cell the time of its timed run: it may use the cell's time up to
// `timeout_s` minus a reserve, reserve = 1.25 x max_seconds (the measured loop and its
// warm-up), but at least a quarter and at most half of the time the cell has left when the
// search starts. Before each probe it predicts the probe's time from the last one (time x
// next batch / last batch: the step grows with the batch; a relaunch's fixed cost makes this
// an over-estimate, the safe side) and does not start a probe predicted to end past that
// share; a probe that runs past it anyway is cut by its deadline. Either way the search stops
// and keeps what it established: the largest batch that fit and the smallest that did not
// (or none), and the cell goes on at the batch chosen from the probes done, with the reason
// among its ineffective settings ("batch_size auto: stopped for time ..."). Before this, a
// ResNet-18 search under load reached batch 1,611 at 5.5 s an iteration and the cell was
// recorded `timeout` after 600 s, losing the boundary it had found. Only when nothing fit yet
// does running out of time fail the cell (status timeout, as before).
//
// Note [Batch search start]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A model may be unable to train at the smallest batches for a reason that has nothing to do
// with memory: batch normalisation needs more than one value per channel ("Expected more
// than 1 value per channel when training" at batch 1 with 1x1 features). Until a probe has
// fit, a probe that fails for another reason than memory moves the search's start up to
// twice that batch (at most max_batch) instead of failing the cell; the start and the first
// such failure are recorded (effective `min_batch`, among `ineffective_reasons`, and the
// rank metric `batch_search_start`). After a fit, or at max_batch, such a failure fails the
// cell as before: the model cannot train there, which is not a search question.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/base/cell_status.h"
#include "common/cell/batch_search.h"
#include "common/cell/cell_spec.h"
#include "common/cell/messages.h"
#include "protocol/group_probe.h"

namespace scalebench {

/// One probe as the group saw it: the reduced outcome, and this rank's own failure text when
/// it failed for a reason other than memory ("" when another rank failed).
struct GroupProbeRun {
  GroupOutcome outcome;
  std::string local_failure;
};

/// Probes `batch` on the group (every rank calls it with the same batch) and returns the
/// reduced outcome; the probe must end by `deadline` (a probe cut by it reports timed_out).
/// May throw only what fails the cell on every rank alike.
using ProbeOneBatch =
    std::function<GroupProbeRun(int64_t batch, std::chrono::steady_clock::time_point deadline)>;

/// What a search established. On every rank the same (the probes are reduced).
struct GroupSearchResult {
  std::vector<BatchProbe> probes;  ///< in the order run, reduced over the group
  GroupChoice choice;              ///< the figures from `probes` (valid when !failed)
  double search_s = 0;             ///< wall time of the whole search
  /// Note [Batch search start]: where the search started when min_batch failed for a reason
  /// other than memory (0: at min_batch), and why.
  int64_t start_batch = 0;
  std::string start_reason;
  int64_t refined_batch = 0;  ///< Note [Batch refinement]: the batch probed after the search
  /// Note [Search time]: why the search stopped before its boundary was within batch_precision
  /// ("" when it completed).
  std::string stopped_reason;
  /// The cell fails: a probe failed for a reason other than memory before anything fit, time
  /// ran out before anything fit, or not even min_batch fits.
  bool failed = false;
  CellStatus status = CellStatus::kOk;
  std::string reason;
};

/// The end of the search's share of the cell's time (Note [Search time]).
std::chrono::steady_clock::time_point search_deadline(
    const CellSpec& cell, std::chrono::steady_clock::time_point start,
    std::chrono::steady_clock::time_point cell_deadline);

/// Runs the search of `cell` (batch_size auto) with `probe`, judged by `budget_bytes` (this
/// rank's). Collective over `group`; never throws what `probe` does not.
GroupSearchResult search_group_batch(const CellSpec& cell, double budget_bytes,
                                     const ProbeOneBatch& probe,
                                     std::chrono::steady_clock::time_point cell_deadline,
                                     MPI_Comm group);

/// The search into the rank's result, complete or failed: its probes, `budget_bytes` (this
/// rank's) and time as metrics, a moved start (effective `min_batch`), the refinement, and
/// the reasons it started late or stopped early among the ineffective settings.
void record_search(const GroupSearchResult& search, double budget_bytes, RankResult& result);

}  // namespace scalebench
