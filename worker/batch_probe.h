// Batch size `auto` on a worker group: runs the probes of Note [Batch search]
// (common/cell/batch_search.h) and picks the batch the cell's timed loop runs.
//
// Note [Group probes]
// ~~~~~~~~~~~~~~~~~~~
// Every rank of the group runs every probe, and the group takes one outcome per probe: after
// each probe the ranks reduce (MPI_Allreduce on the group) the worst status, the slowest
// median and p99 and the largest peak memory. So all ranks walk the same search, and no rank
// is left waiting in a collective that another skipped: a probe that fails on one rank only
// (an uneven budget, one GPU fuller than the others) fails for all, after everyone finished it.
//
// A probe: the cell's workload at that batch (one warm-up + `probe_iterations` measured
// iterations, validation off), built after release_cached_memory() and a reset of the peak
// counters, then destroyed and released again. It fits when it completes and its peak
// (GPU: allocated; CPU: resident set) is within the budget (memory_budget_bytes).
//
// An out-of-memory error of the allocator inside a DDP step would leave the other ranks in
// the step's gradient allreduce. So a training group of two or more ranks first runs one
// step of the probe on each rank alone (no collectives, same per-rank batch and model): an
// out-of-memory error there is caught, the group agrees, and the probe is over for all. Only
// a batch whose lone step fits is then run with the group's collectives. (The DDP step adds
// the gradient buckets, a few parameter-sized buffers; an OOM caused by them alone is left
// to the collective watchdog, Note [Collective watchdog].)
#pragma once

#include <mpi.h>
#include <torch/torch.h>

#include <chrono>
#include <vector>

#include "common/cell/batch_search.h"
#include "common/cell/messages.h"

namespace scalebench {

struct BatchSearchOutcome {
  std::vector<BatchProbe> probes;  ///< in the order run, reduced over the group
  int64_t chosen_batch = 0;        ///< BatchFigures::recommended_batch
  double budget_bytes = 0;         ///< the budget the probes were judged by (this rank's)
  double search_s = 0;             ///< wall time of the whole search
  /// Note [Batch search start]: where the search started when min_batch failed for a reason
  /// other than memory (0: at min_batch), and the first such failure in words ("" when it did
  /// not move).
  int64_t start_batch = 0;
  std::string start_reason;
  /// Note [Batch refinement] (common/cell/batch_refinement.h): the batch probed after the
  /// search inside the safety margin; 0 when none was.
  int64_t refined_batch = 0;
};

/// Runs the search for `assignment` (cell with batch_size auto, switches applied) on
/// `group`, filling `outcome` as it goes (so that the probes are kept when it throws).
/// Throws OutOfMemoryError(kBatchSearch) when not even min_batch fits, CellError
/// (kBatchSearch) when a probe fails otherwise or the deadline passes; every rank throws
/// alike (the outcomes are reduced).
///
/// Note [Batch search start]
/// ~~~~~~~~~~~~~~~~~~~~~~~~~
/// A model may be unable to train at the smallest batches for a reason that has nothing to do
/// with memory: batch normalisation needs more than one value per channel ("Expected more
/// than 1 value per channel when training" at batch 1 with 1x1 features). Until a probe has
/// fit, a probe that fails for another reason than memory moves the search's start up to
/// twice that batch (at most max_batch) instead of failing the cell; the start and the first
/// such failure are recorded (effective `min_batch`, among `ineffective_reasons`, and the
/// rank metric `batch_search_start`). After a fit, or at max_batch, such a failure fails the
/// cell as before: the model cannot train there, which is not a search question.
void search_batch(const Assignment& assignment, const torch::Device& device, MPI_Comm group,
                  int node_workers, std::chrono::steady_clock::time_point deadline,
                  BatchSearchOutcome& outcome);

/// Test-only: the rank `world_rank` judges its probes by `budget_bytes` instead of the cell's
/// budget (an uneven budget across a group); world_rank < 0 clears it.
void set_memory_budget_for_testing(int world_rank, double budget_bytes);

}  // namespace scalebench
