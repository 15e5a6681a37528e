// The worker side of Note [Orchestrator protocol] (ranks 1..N of MPI_COMM_WORLD).
#pragma once

#include <memory>
#include <vector>

#include "common/base/deadline_watchdog.h"
#include "common/cell/messages.h"
#include "protocol/cell_runner.h"

namespace scalebench {

/// MPI tag for MPI_Comm_create_group of the group `members`: 1000 + members[0]. Groups
/// that exist at the same time are disjoint, so their first members, and so their tags,
/// differ; every member computes the same tag. See Note [Orchestrator protocol].
int group_creation_tag(const std::vector<int>& members);

/// Where this rank runs. COLLECTIVE over MPI_COMM_WORLD (every rank, rank 0 included,
/// must call it): splits the world by node; local_index counts this node's worker ranks
/// (world rank != 0) below this one.
WorkerContext discover_worker_context();

/// Sends this worker's WorkerHello to rank 0 (first message of the protocol).
void send_hello(const WorkerContext& context, CellRunner& runner);

// Note [Worker deadline]
// ~~~~~~~~~~~~~~~~~~~~~~
// Rank 0 records a cell `timeout` at timeout_s + the watchdog grace and ends the job
// --hang-limit later (Note [Late cells]); but a worker cut off from rank 0 (a node whose link
// went silent, issue 55) never hears of it, and a rank stuck in an MPI collective cannot be
// interrupted: it would live on after the job, holding its GPU and ports. So each worker
// rank watches its own cell: a DeadlineWatchdog at dispatch + timeout_s +
// WorkerContext::overrun_limit_s (the watchdog grace + the hang limit + kWorkerDeadlineMarginS,
// so rank 0 always acts first when it can) writes one line to stderr and ends the rank with
// _exit(kExitWorkerDeadline): no destructor runs (one may wait on the stuck collective), the
// kernel frees the rank's memory, GPU context and sockets, and the program supervisor of a
// program cell ends the program with its rank (Note [Program supervisor]).
inline constexpr double kWorkerDeadlineMarginS = 30;

/// Note [Worker deadline]: the watchdog of one cell on this rank (null when
/// context.overrun_limit_s is 0); destroying it before the deadline cancels it.
std::unique_ptr<DeadlineWatchdog> watch_own_deadline(const CellSpec& cell,
                                                     const WorkerContext& context);

/// Serves assignments from rank 0 until Tag::kShutdown: for each, creates the group
/// communicator (members only), runs the cell through `runner` and sends the RankResult
/// to rank 0. A FatalError from the runner is reported to rank 0 as a failed result with
/// `fatal` set (rank 0 then ends the job); any other exception that escapes the
/// runner is recorded as a failed result (phase `worker`) and the loop goes on. Idle
/// waiting polls with short sleeps so a waiting worker leaves the CPU to others.
/// Returns the number of cells this rank ran.
int run_worker_loop(CellRunner& runner, const WorkerContext& context);

}  // namespace scalebench
