// The worker side of Note [Orchestrator protocol] (ranks 1..N of MPI_COMM_WORLD).
#pragma once

#include <vector>

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

/// Serves assignments from rank 0 until Tag::kShutdown: for each, creates the group
/// communicator (members only), runs the cell through `runner` and sends the RankResult
/// to rank 0. A FatalError from the runner is reported to rank 0 as a failed result with
/// `fatal` set (rank 0 then ends the job); any other exception that escapes the
/// runner is recorded as a failed result (phase `worker`) and the loop goes on. Idle
/// waiting polls with short sleeps so a waiting worker leaves the CPU to others.
/// Returns the number of cells this rank ran.
int run_worker_loop(CellRunner& runner, const WorkerContext& context);

}  // namespace scalebench
