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
#include "protocol/group_batch_search.h"

namespace scalebench {

struct BatchSearchOutcome {
  GroupSearchResult search;  ///< the probes, the start, the refinement, why it stopped
  int64_t chosen_batch = 0;  ///< BatchFigures::recommended_batch
  double budget_bytes = 0;   ///< the budget the probes were judged by (this rank's)
};

/// Runs the search for `assignment` (cell with batch_size auto, switches applied) on
/// `group`, filling `outcome` as it goes (so that the probes are kept when it throws).
/// Throws OutOfMemoryError(kBatchSearch) when not even min_batch fits, CellError
/// (kBatchSearch) when a probe fails otherwise, or the deadline passes before anything fit; every
/// rank throws alike (the outcomes are reduced). (the search loop, its start and its time:
/// protocol/group_batch_search.h).
void search_batch(const Assignment& assignment, const torch::Device& device, MPI_Comm group,
                  int node_workers, std::chrono::steady_clock::time_point deadline,
                  BatchSearchOutcome& outcome);

/// Test-only: the rank `world_rank` judges its probes by `budget_bytes` instead of the cell's
/// budget (an uneven budget across a group); world_rank < 0 clears it.
void set_memory_budget_for_testing(int world_rank, double budget_bytes);

}  // namespace scalebench
