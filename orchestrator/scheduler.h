// Placement of cells onto worker groups: pure functions plus a small stateful queue.
//
// Note [Scheduling]
// ~~~~~~~~~~~~~~~~~
// Cells are dispatched in matrix order. A cell needs `world_size` workers; a cell that
// needs more workers than the job has can never run and is reported by
// `unschedulable_reason` (rank 0 records it as `skipped`, never drops it).
//
//   exclusive: a cell starts only when no other cell runs, so it has the whole
//              allocation to itself (no interference between cells: clean numbers).
//   packed:    walk the pending cells in order and start every one whose group fits in
//              the currently free workers (first fit with backfill: a small cell later in
//              the queue may start while a bigger one waits for workers to free up).
//
// Group choice (`choose_group`) prefers one node: among the nodes with enough free
// workers it takes the one with the fewest free workers (best fit, keeps big nodes
// whole for big cells), and there the lowest local indices. When no node has enough, it
// spans the fewest nodes by taking nodes with the most free workers first. Members are
// returned in group-rank order (node by node, local index ascending).
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "orchestrator/run_options.h"

namespace scalebench {

/// A worker rank as the scheduler sees it (from its WorkerHello).
struct WorkerSlot {
  int world_rank = -1;
  std::string host;
  int local_index = 0;
  bool operator==(const WorkerSlot&) const = default;
};

/// A cell waiting to run: its index in the caller's list and its group size.
struct PendingCell {
  size_t index = 0;
  int world_size = 1;
};

/// One decision: start cell `index` on `members` (MPI_COMM_WORLD ranks, group-rank order).
struct Dispatch {
  size_t index = 0;
  std::vector<int> members;
  bool operator==(const Dispatch&) const = default;
};

/// Why a cell of `world_size` can never run on `worker_count` workers, or nullopt if it can.
std::optional<std::string> unschedulable_reason(int world_size, int worker_count);

/// `world_size` workers out of `free_workers` per Note [Scheduling], or nullopt if fewer
/// are free. Pure.
std::optional<std::vector<int>> choose_group(const std::vector<WorkerSlot>& free_workers,
                                             int world_size);

/// The cells to start now, given the pending queue (in order), the free workers and the
/// number of cells running. Pure; see Note [Scheduling].
std::vector<Dispatch> plan_dispatches(const std::vector<PendingCell>& pending,
                                      const std::vector<WorkerSlot>& free_workers,
                                      size_t running_cells, SchedulingMode mode);

/// The pending queue and free-worker set of one run. Not thread-safe (rank 0's loop).
class Scheduler {
 public:
  /// `pending` must contain only schedulable cells (see unschedulable_reason).
  Scheduler(std::vector<WorkerSlot> workers, std::vector<PendingCell> pending, SchedulingMode mode);

  /// Removes the cells to start now from the queue and their members from the free set.
  std::vector<Dispatch> take_dispatches();
  /// The group of a finished cell is free again.
  void release(const std::vector<int>& members);
  /// Appends cells to the queue (Note [Adaptive repetitions]: a round released after a look).
  void add_pending(const std::vector<PendingCell>& cells);
  /// Forgets every pending cell (stop requested); returns them.
  std::vector<PendingCell> drop_pending();

  [[nodiscard]] size_t running_count() const { return running_; }
  /// Nothing pending and nothing running.
  [[nodiscard]] bool done() const { return pending_.empty() && running_ == 0; }

 private:
  std::vector<WorkerSlot> workers_;
  std::set<int> free_;  ///< world ranks
  std::deque<PendingCell> pending_;
  SchedulingMode mode_;
  size_t running_ = 0;
};

}  // namespace scalebench
