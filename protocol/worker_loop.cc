#include "protocol/worker_loop.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/base/cpu_model.h"
#include "common/base/deadline_watchdog.h"
#include "common/base/error.h"
#include "common/base/exit_status.h"
#include "common/base/logging.h"
#include "protocol/fault_injection.h"
#include "protocol/launcher_guard.h"
#include "protocol/mpi_comm.h"
#include "protocol/poll_backoff.h"
#include "protocol/wire.h"

namespace scalebench {
namespace {

constexpr int kGroupTagBase = 1000;

/// Blocks (politely) until rank 0 sends any message; returns its tag and size.
MPI_Status wait_for_message_from_orchestrator() {
  PollBackoff backoff;  // Note [Polling back-off]
  for (;;) {
    int flag = 0;
    MPI_Status status{};
    MPI_CHECK(MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status));
    if (flag != 0) return status;
    backoff.wait();
  }
}

RankResult failed_result(const Assignment& assignment, const WorkerContext& context,
                         FailurePhase phase, const std::string& reason) {
  RankResult result;
  result.status = CellStatus::kFailed;
  result.failed_phase = phase;
  result.reason = reason;
  result.cell_id = assignment.cell.cell_id;
  result.world_rank = context.world_rank;
  result.host = context.host;
  return result;
}

RankResult run_assignment(CellRunner& runner, const Assignment& assignment,
                          const WorkerContext& context) {
  const auto position =
      std::find(assignment.members.begin(), assignment.members.end(), context.world_rank) -
      assignment.members.begin();
  CellLogScope log_scope(assignment.cell.cell_id);
  SB_LOG(info) << "cell " << cell_label(assignment.cell) << " as group rank " << position << " of "
               << assignment.members.size();
  RankResult result;
  // Note [Worker deadline]: past it this rank ends itself, rank 0 reachable or not.
  const auto own_deadline = watch_own_deadline(assignment.cell, context);
  try {
    const Communicator group =
        create_group_communicator(assignment.members, group_creation_tag(assignment.members));
    result = runner.run(assignment, group.get(), context);
  } catch (const FatalError& e) {
    SB_LOG(error) << "fatal error in cell: " << e.what();
    result = failed_result(assignment, context, FailurePhase::kFatal, e.what());
    result.fatal = true;
  } catch (const CellError& e) {
    result = failed_result(assignment, context, e.phase(), e.what());
    if (dynamic_cast<const OutOfMemoryError*>(&e) != nullptr) result.status = CellStatus::kOom;
  } catch (const std::exception& e) {
    result = failed_result(assignment, context, FailurePhase::kWorker, e.what());
  }
  result.cell_id = assignment.cell.cell_id;
  result.group_rank = static_cast<int>(position);
  result.world_rank = context.world_rank;
  if (result.host.empty()) result.host = context.host;
  SB_LOG(info) << "cell finished: " << to_string(result.status)
               << (result.reason.empty() ? "" : ": " + result.reason);
  return result;
}

}  // namespace

std::unique_ptr<DeadlineWatchdog> watch_own_deadline(const CellSpec& cell,
                                                     const WorkerContext& context) {
  if (context.overrun_limit_s <= 0) return nullptr;
  const double limit_s = cell.timeout_s + context.overrun_limit_s;
  return std::make_unique<DeadlineWatchdog>(
      DeadlineWatchdog::Clock::now() +
          std::chrono::duration_cast<DeadlineWatchdog::Clock::duration>(
              std::chrono::duration<double>(limit_s)),
      [limit_s, rank = context.world_rank, label = cell_label(cell)] {
        const std::string line = "scalebench: worker rank " + std::to_string(rank) +
                                 " ends itself: cell " + label + " is still running " +
                                 std::to_string(static_cast<long long>(limit_s)) +
                                 " s after it started (timeout_s + watchdog grace + hang limit + "
                                 "margin), so rank 0 is unreachable or the job is over (Note "
                                 "[Worker deadline])\n";
        [[maybe_unused]] const auto written = ::write(STDERR_FILENO, line.data(), line.size());
        guard_launcher_end("a worker rank past its deadline");  // Note [Launcher guard]
        ::_exit(kExitWorkerDeadline);
      });
}

int group_creation_tag(const std::vector<int>& members) {
  return kGroupTagBase + (members.empty() ? 0 : members.front());
}

WorkerContext discover_worker_context() {
  WorkerContext context;
  context.world_rank = world_rank();
  context.host = hostname();
  context.node_cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  const Communicator node = split_shared_node(MPI_COMM_WORLD);
  std::vector<int> node_ranks(static_cast<size_t>(node.size()));
  MPI_CHECK(
      MPI_Allgather(&context.world_rank, 1, MPI_INT, node_ranks.data(), 1, MPI_INT, node.get()));
  context.local_index = 0;
  context.local_workers = 0;
  for (const int rank : node_ranks) {
    if (rank == 0) continue;
    ++context.local_workers;
    if (rank < context.world_rank) ++context.local_index;
  }
  context.local_workers = std::max(context.local_workers, 1);
  return context;
}

void send_hello(const WorkerContext& context, CellRunner& runner) {
  WorkerHello hello;
  hello.world_rank = context.world_rank;
  hello.host = context.host;
  hello.local_index = context.local_index;
  hello.device = runner.device_name(context);
  hello.cpu_model = cpu_model_name();
  hello.node_cores = context.node_cores;
  send_message(serialize(hello), 0, Tag::kHello, MPI_COMM_WORLD);
}

int run_worker_loop(CellRunner& runner, const WorkerContext& context) {
  int cells = 0;
  for (;;) {
    const MPI_Status status = wait_for_message_from_orchestrator();
    const auto tag = static_cast<Tag>(status.MPI_TAG);
    const auto message = receive_message(0, tag, MPI_COMM_WORLD);
    if (tag == Tag::kShutdown) {
      SB_LOG(debug) << "shutdown after " << cells << " cells";
      return cells;
    }
    if (tag != Tag::kAssign) {
      throw FatalError("worker " + std::to_string(context.world_rank) +
                       " received an unexpected message (tag " + std::to_string(status.MPI_TAG) +
                       ") from rank 0; the ranks run different scalebench versions?");
    }
    const Assignment assignment = deserialize_assignment(message.bytes);
    fault_point("receive", context.world_rank);  // Note [Fault injection]
    const RankResult result = run_assignment(runner, assignment, context);
    fault_point("result", context.world_rank);
    send_message(serialize(result), 0, Tag::kResult, MPI_COMM_WORLD);
    ++cells;
  }
}

}  // namespace scalebench
