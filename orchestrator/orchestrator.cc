// Rank 0's loop. See Note [Orchestrator protocol] in orchestrator/orchestrator.h.
#include "orchestrator/orchestrator.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "common/base/error.h"
#include "common/base/logging.h"
#include "orchestrator/progress.h"
#include "orchestrator/progress_watchdog.h"
#include "orchestrator/scheduler.h"
#include "protocol/fault_injection.h"
#include "protocol/mpi_comm.h"
#include "protocol/poll_backoff.h"
#include "protocol/signals.h"
#include "protocol/wire.h"

namespace scalebench {

bool should_run_on_resume(std::optional<CellStatus> stored, bool retry_failed) {
  if (!stored) return true;
  switch (*stored) {
    case CellStatus::kOk:
      return false;
    case CellStatus::kFailed:
    case CellStatus::kOom:
    case CellStatus::kTimeout:
      return retry_failed;
    case CellStatus::kRunning:
    case CellStatus::kInterrupted:
    case CellStatus::kSkipped:
      return true;
  }
  return true;
}

std::vector<WorkerHello> collect_hellos(int world_size, double limit_s) {
  std::vector<WorkerHello> hellos;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(limit_s));
  PollBackoff backoff;  // Note [Polling back-off]
  while (static_cast<int>(hellos.size()) < world_size - 1) {
    if (auto message = try_receive_message(MPI_ANY_SOURCE, {Tag::kHello}, MPI_COMM_WORLD)) {
      auto hello = deserialize_hello(message->bytes);
      hello.world_rank = message->source;
      hellos.push_back(std::move(hello));
      backoff.reset();
      continue;
    }
    if (limit_s > 0 && std::chrono::steady_clock::now() > deadline) {
      std::set<int> silent;
      for (int rank = 1; rank < world_size; ++rank) silent.insert(rank);
      for (const auto& hello : hellos) silent.erase(hello.world_rank);
      std::ostringstream ranks;
      for (const int rank : silent) ranks << (rank == *silent.begin() ? "" : ",") << rank;
      throw FatalError("worker ranks " + ranks.str() + " did not report within " +
                       std::to_string(static_cast<int>(limit_s)) +
                       " s of the start (--hang-limit): they are stuck or cannot start "
                       "their device; nothing was run");
    }
    backoff.wait();
  }
  std::sort(hellos.begin(), hellos.end(),
            [](const auto& a, const auto& b) { return a.world_rank < b.world_rank; });
  return hellos;
}

void shutdown_workers(int world_size) {
  for (int rank = 1; rank < world_size; ++rank) {
    send_message({}, rank, Tag::kShutdown, MPI_COMM_WORLD);
  }
}

namespace {

using Clock = std::chrono::steady_clock;

struct RunningCell {
  const CellSpec* cell = nullptr;
  std::vector<int> members;
  std::vector<std::optional<RankResult>> results;
  size_t received = 0;
  Clock::time_point deadline;       ///< timeout_s + watchdog grace after dispatch
  Clock::time_point hard_deadline;  ///< deadline + hang limit: then the job ends
  bool overdue = false;             ///< past `deadline`: already recorded `timeout`
  std::string overdue_reason;
};

Clock::duration seconds(double value) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(value, 0.0)));
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::ostringstream out;
  for (size_t i = 0; i < ranks.size(); ++i) out << (i == 0 ? "" : ",") << ranks[i];
  return out.str();
}

/// Every rank ran its whole timed loop (rows beyond the warm-up on each).
bool every_rank_measured(const std::vector<RankResult>& results) {
  return std::all_of(results.begin(), results.end(), [](const RankResult& r) {
    return r.iterations() > static_cast<size_t>(std::max(0, r.warmup_iterations));
  });
}

bool is_failure(CellStatus status) {
  return status == CellStatus::kFailed || status == CellStatus::kOom ||
         status == CellStatus::kTimeout;
}

/// The loop's state; one instance per run_orchestrator call.
class Loop {
 public:
  Loop(const std::vector<CellSpec>& cells, const std::vector<WorkerHello>& workers,
       ResultSink& sink, const OrchestratorOptions& options)
      : cells_(cells),
        sink_(sink),
        options_(options),
        progress_(
            options.total_cells > 0 ? options.total_cells : cells.size() + options.already_done,
            options.already_done),
        workers_(workers) {}

  OrchestratorOutcome run() {
    ProgressWatchdog watchdog(options_.hang_limit_s);  // Note [Rank 0 watchdog]
    fault_point("start", 0);
    adaptive_.emplace(cells_);  // Note [Adaptive repetitions]
    started_ = Clock::now();
    auto pending = schedulable(cells_, workers_.size());
    const std::vector<size_t> initial = adaptive_->initial();
    std::vector<PendingCell> now;
    for (const auto& cell : pending) {
      if (std::binary_search(initial.begin(), initial.end(), cell.index)) {
        now.push_back(cell);
      } else {
        held_.emplace(cell.index, cell);
      }
    }
    scheduler_.emplace(slots(workers_), std::move(now), options_.scheduling);
    PollBackoff backoff;  // Note [Polling back-off]
    while ((!scheduler_->done() || (adaptive_->holding() && !stopping_)) &&
           !outcome_.abort_message) {
      watchdog.beat();
      handle_signals();
      if (outcome_.abort_message) break;
      if (!stopping_) {
        look_if_due();
        dispatch();
      }
      if (auto message =
              try_receive_message(MPI_ANY_SOURCE, {Tag::kResult, Tag::kProgress}, MPI_COMM_WORLD)) {
        if (message->tag == Tag::kProgress) {
          handle_progress(*message);
        } else {
          handle_result(*message);
        }
        backoff.reset();
        continue;
      }
      check_watchdog();
      backoff.wait();
    }
    fault_point("finish", 0);
    return outcome_;
  }

 private:
  static std::vector<WorkerSlot> slots(const std::vector<WorkerHello>& workers) {
    std::vector<WorkerSlot> result;
    result.reserve(workers.size());
    for (const auto& w : workers) result.push_back({w.world_rank, w.host, w.local_index});
    return result;
  }

  /// Records unschedulable and duplicate cells; returns the rest as the pending queue.
  std::vector<PendingCell> schedulable(const std::vector<CellSpec>& cells, size_t worker_count) {
    std::vector<PendingCell> pending;
    std::set<std::string> seen;
    for (size_t i = 0; i < cells.size(); ++i) {
      const auto& cell = cells[i];
      if (!seen.insert(cell.cell_id).second) {
        SB_LOG(warning) << "cell " << cell.cell_id << " (" << cell_label(cell)
                        << ") appears twice in the matrix; it runs once";
        if (adaptive_) adaptive_->finished(i);  // never runs: no round waits for it
        continue;
      }
      if (auto reason = unschedulable_reason(cell.world_size, static_cast<int>(worker_count))) {
        SB_LOG(warning) << "skipping " << cell_label(cell) << ": " << *reason;
        sink_.mark_skipped(cell, *reason);
        finished(cell, CellStatus::kSkipped);
        continue;
      }
      pending.push_back({i, cell.world_size});
    }
    return pending;
  }

  void finished(const CellSpec& cell, CellStatus status) {
    if (adaptive_) adaptive_->finished(static_cast<size_t>(&cell - cells_.data()));
    ++outcome_.counts[status];
    progress_.cell_finished(status);
    SB_LOG(info) << progress_.line() << "  " << cell_label(cell) << ": " << to_string(status);
    if (options_.fail_fast && is_failure(status) && !stopping_) {
      SB_LOG(warning) << "--fail-fast: " << cell_label(cell) << " is " << to_string(status)
                      << "; no further cells are started";
      stop();
    }
  }

  void stop() {
    stopping_ = true;
    if (scheduler_) outcome_.not_started += scheduler_->drop_pending().size();
    if (adaptive_) outcome_.not_started += adaptive_->drop_held();
  }

  void handle_signals() {
    const int signals = StopSignalHandler::count();
    if (signals > 0 && !stopping_) {
      SB_LOG(warning) << "signal " << StopSignalHandler::last_signal()
                      << " received: no new cells are started; waiting for " << running_.size()
                      << " running cell(s) (a second signal interrupts them)";
      outcome_.interrupted = true;
      stop();
    }
    if (signals > 1 && !running_.empty()) {
      for (auto& [id, running] : running_) {
        sink_.finish_without_results(
            *running.cell, CellStatus::kInterrupted, FailurePhase::kInterrupted,
            "stopped by signal " + std::to_string(StopSignalHandler::last_signal()));
        ++outcome_.counts[CellStatus::kInterrupted];
      }
      outcome_.abort_message =
          "second stop signal: running cells recorded as interrupted; "
          "rerun with --resume to finish them";
      outcome_.abort_status = kExitInterrupted;
    }
  }

  /// Note [Adaptive repetitions]: when every run of the rounds before a held one finished,
  /// the file is made durable, the analysis looks, and the round is released for the
  /// undecided series; the decided (or out-of-budget) series' held runs are recorded skipped.
  void look_if_due() {
    for (int64_t round = adaptive_->round_ready(); round >= 0; round = adaptive_->round_ready()) {
      const double budget_s = adaptive_->budget_s();
      const double elapsed_s = std::chrono::duration<double>(Clock::now() - started_).count();
      const bool out_of_budget = budget_s > 0 && elapsed_s > budget_s;
      AdaptiveLook look;  // without a look (none, or it failed): every series undecided
      look.undecided = adaptive_->held_series();
      if (!out_of_budget && options_.look) {
        try {
          sink_.flush();
          look = options_.look(round);
        } catch (const std::exception& error) {
          SB_LOG(warning) << "repetitions auto: the look before round " << round + 1
                          << " failed, so the round runs for every series: " << error.what();
        }
      }
      if (!look.summary.empty()) SB_LOG(info) << "repetitions auto: " << look.summary;
      std::vector<size_t> retired;
      const std::vector<size_t> released = adaptive_->release(round, look, out_of_budget, retired);
      for (const size_t index : retired) {
        held_.erase(index);
        sink_.mark_skipped(cells_[index], adaptive_->reason_of(index));
        finished(cells_[index], CellStatus::kSkipped);
      }
      std::vector<PendingCell> next;
      for (const size_t index : released) {
        if (const auto it = held_.find(index); it != held_.end()) {
          next.push_back(it->second);
          held_.erase(it);
        }
      }
      scheduler_->add_pending(next);
      if (!next.empty()) return;
    }
  }

  void dispatch() {
    for (const auto& d : scheduler_->take_dispatches()) {
      const CellSpec& cell = cells_[d.index];
      Assignment assignment{cell, d.members, {}, {}};  // inputs attached below
      if (!attach_inputs(assignment)) {
        scheduler_->release(d.members);
        continue;
      }
      sink_.mark_running(cell, d.members);
      fault_point("dispatch", 0);
      const auto bytes = serialize(assignment);
      for (const int rank : d.members) send_message(bytes, rank, Tag::kAssign, MPI_COMM_WORLD);
      RunningCell running;
      running.cell = &cell;
      running.members = d.members;
      running.results.resize(d.members.size());
      running.deadline = Clock::now() + seconds(cell.timeout_s + options_.watchdog_grace_s);
      running.hard_deadline = running.deadline + seconds(options_.hang_limit_s);
      SB_LOG(info) << "start " << cell_label(cell) << " [" << cell.cell_id << "] on ranks "
                   << join_ranks(d.members);
      running_.emplace(cell.cell_id, std::move(running));
    }
  }

  /// options_.attach_inputs on `assignment`; false (the cell recorded failed) when it
  /// throws CellError.
  bool attach_inputs(Assignment& assignment) {
    if (!options_.attach_inputs) return true;
    const CellSpec& cell = assignment.cell;
    try {
      options_.attach_inputs(cell, assignment);
      return true;
    } catch (const CellError& error) {
      SB_LOG(warning) << cell_label(cell) << " failed in phase '" << to_string(error.phase())
                      << "': " << error.what();
      sink_.finish_without_results(cell, CellStatus::kFailed, error.phase(), error.what());
      finished(cell, CellStatus::kFailed);
      return false;
    }
  }

  /// Note [Cell progress]: logged and recorded while the cell runs; a report that arrives
  /// after its cell finished (or from a rank outside the group) is dropped.
  void handle_progress(const ReceivedMessage& message) {
    const CellProgress progress = deserialize_progress(message.bytes);
    const auto it = running_.find(progress.cell_id);
    if (it == running_.end() || it->second.overdue || it->second.members.empty() ||
        it->second.members.front() != message.source) {
      return;
    }
    // auto counts: the total is the rule's cap (Note [Iterations auto]).
    const CellSpec& cell = *it->second.cell;
    const bool capped = (progress.stage == "measured" && iterations_auto(cell)) ||
                        (progress.stage == "warmup" && warmup_auto(cell));
    SB_LOG(info) << cell_label(cell) << ": " << progress.stage << " iteration " << progress.done
                 << (capped ? " (auto, cap " : " of ") << progress.total << (capped ? ")" : "");
    sink_.progress(*it->second.cell, progress);
  }

  void handle_result(const ReceivedMessage& message) {
    RankResult result = deserialize_result(message.bytes);
    const auto it = running_.find(result.cell_id);
    if (it == running_.end()) {
      SB_LOG(warning) << "ignoring a result for cell " << result.cell_id << " from rank "
                      << message.source << ": the cell is not running";
      return;
    }
    RunningCell& running = it->second;
    const auto slot = std::find(running.members.begin(), running.members.end(), message.source);
    if (slot == running.members.end()) {
      SB_LOG(warning) << "ignoring a result from rank " << message.source
                      << ", not a member of cell " << result.cell_id;
      return;
    }
    result.world_rank = message.source;
    result.group_rank = static_cast<int>(slot - running.members.begin());
    if (result.fatal) {
      const std::string reason = "rank " + std::to_string(message.source) + ": " + result.reason;
      sink_.finish_without_results(*running.cell, CellStatus::kFailed, result.failed_phase, reason);
      ++outcome_.counts[CellStatus::kFailed];
      outcome_.abort_message = "fatal error in cell " + cell_label(*running.cell) + " (" + reason +
                               "); the job cannot go on. Finished cells are saved; rerun with "
                               "--resume";
      return;
    }
    auto& stored = running.results[static_cast<size_t>(result.group_rank)];
    if (!stored) ++running.received;
    stored = std::move(result);
    if (running.received == running.members.size()) complete(it);
  }

  void complete(std::map<std::string, RunningCell>::iterator it) {
    RunningCell& running = it->second;
    std::vector<RankResult> results;
    for (auto& result : running.results) results.push_back(std::move(*result));
    CellOutcome cell_result = cell_outcome(results);
    if (running.overdue) {
      // See Note [Late cells]: recorded `timeout` at the deadline; now the ranks are free.
      cell_result = {
          CellStatus::kTimeout, FailurePhase::kWatchdog,
          running.overdue_reason + "; the ranks came back later (" +
              (cell_result.status == CellStatus::kOk ? std::string("ok") : cell_result.reason) +
              ") and the sweep went on"};
      sink_.finish_without_results(*running.cell, cell_result.status, cell_result.failed_phase,
                                   cell_result.reason);
    } else if (cell_result.status == CellStatus::kOk) {
      fault_point("write", 0);
      sink_.complete(*running.cell, results);
    } else if (cell_result.status == CellStatus::kOom && every_rank_measured(results)) {
      // memory_limit_mb judged after the loop: the cell is `oom`, its timings are kept.
      SB_LOG(warning) << cell_label(*running.cell) << " oom: " << cell_result.reason;
      sink_.complete(*running.cell, results);
    } else {
      SB_LOG(warning) << cell_label(*running.cell) << " " << to_string(cell_result.status)
                      << " in phase '" << to_string(cell_result.failed_phase)
                      << "': " << cell_result.reason;
      sink_.finish_without_results(*running.cell, cell_result.status, cell_result.failed_phase,
                                   cell_result.reason);
    }
    const CellSpec& cell = *running.cell;
    scheduler_->release(running.members);
    running_.erase(it);
    finished(cell, cell_result.status);
  }

  /// See Note [Late cells] in orchestrator.h.
  void check_watchdog() {
    const auto now = Clock::now();
    for (auto& [id, running] : running_) {
      if (now < running.deadline) continue;
      std::vector<int> silent;
      for (size_t i = 0; i < running.members.size(); ++i) {
        if (!running.results[i]) silent.push_back(running.members[i]);
      }
      if (!running.overdue) {
        running.overdue = true;
        running.overdue_reason =
            "no result within timeout_s=" + std::to_string(running.cell->timeout_s) +
            " (+ watchdog grace " + std::to_string(options_.watchdog_grace_s) + " s) from ranks " +
            join_ranks(silent);
        sink_.finish_without_results(*running.cell, CellStatus::kTimeout, FailurePhase::kWatchdog,
                                     running.overdue_reason);
        SB_LOG(warning) << cell_label(*running.cell) << " [" << id
                        << "]: " << running.overdue_reason
                        << "; recorded as timeout. Waiting up to " << options_.hang_limit_s
                        << " s (--hang-limit) for the ranks to come back before the job ends";
        continue;
      }
      if (now < running.hard_deadline) continue;
      ++outcome_.counts[CellStatus::kTimeout];
      outcome_.abort_message =
          "cell " + cell_label(*running.cell) + " [" + id + "] timed out and ranks " +
          join_ranks(silent) + " did not come back within --hang-limit " +
          std::to_string(options_.hang_limit_s) +
          " s: they are stuck (e.g. in a collective, which cannot be cancelled), so the job "
          "ends here. The cell is recorded as timeout and every finished cell is saved; run "
          "the same command with --resume to run the remaining cells";
      return;
    }
  }

  const std::vector<CellSpec>& cells_;
  ResultSink& sink_;
  OrchestratorOptions options_;
  Progress progress_;
  const std::vector<WorkerHello>& workers_;
  std::optional<Scheduler> scheduler_;
  std::optional<AdaptiveRounds> adaptive_;  ///< Note [Adaptive repetitions]
  std::map<size_t, PendingCell> held_;      ///< adaptive runs not yet released, by index
  Clock::time_point started_;
  std::map<std::string, RunningCell> running_;
  bool stopping_ = false;
  OrchestratorOutcome outcome_;
};

}  // namespace

OrchestratorOutcome run_orchestrator(const std::vector<CellSpec>& cells,
                                     const std::vector<WorkerHello>& workers, ResultSink& sink,
                                     const OrchestratorOptions& options) {
  Loop loop(cells, workers, sink, options);
  return loop.run();
}

}  // namespace scalebench
