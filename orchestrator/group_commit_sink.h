// Rank 0's results sink: records go to the results store through one writer thread that
// commits them in groups, so that the dispatch loop never waits for the file.
//
// Note [Group commit]
// ~~~~~~~~~~~~~~~~~~~
// Every update of the results file copies the whole file (Note [Results durability]):
// O(file size), 3-14 ms for a file of 200 small cells on the 2-core VM, twice per cell
// (`running`, then the results). Done by the dispatch loop itself, that made a sweep of tiny
// cells spend most of its wall time writing (docs/performance.md, orchestration).
//
// So the loop only queues a record (a closure holding copies of the cell, its ranks' results
// and the time of the event) and goes on; a writer thread takes everything queued and commits
// it as ONE update (ResultsStore::batch: one copy, one rename). The file stays what Note
// [Results durability] promises at every instant: complete, closed, readable; it lags the
// loop by at most one commit. Pacing: after a commit that took d seconds the next one starts
// no earlier than d * (1 - duty) / duty later (duty = 0.1: the writer is busy at most 10 % of
// the time, however large the file grows), capped at `max_delay_s`, and at once when the
// loop asks for a flush. A long cell's results are committed within milliseconds (nothing
// else is queued); a sweep of tiny cells commits many cells per update.
//
// What a SIGKILL of rank 0 can lose: the records queued since the last commit began (at most
// about `max_delay_s` plus one commit of cells), which `--resume` runs again; nothing that a
// commit wrote. Every normal end, a stop signal, a fatal worker error and a watchdog timeout
// flush first (orchestrator_rank.cc); only rank 0's own watchdog (_exit) and a kill do not.
//
// A commit that fails (a full disk: NoSpaceError) keeps the file as it was; the failure is
// rethrown on the loop's thread by the next record or flush, and nothing more is written.
//
// Threads: only the writer thread calls HDF5 while it runs; the owner reads the file (or
// calls the store) only after close().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "orchestrator/orchestrator.h"
#include "results/store.h"

namespace scalebench {

struct GroupCommitPacing {
  double duty = 0.1;         ///< largest share of wall time the writer spends committing
  double max_delay_s = 5.0;  ///< longest pause between two commits
};

/// What the writer did (for logs, tests and tests/perf).
/// One commit of the writer, for the run's timeline (`scalebench trace`).
struct CommitEvent {
  double start_epoch_s = 0;  ///< system clock, Unix seconds
  double duration_s = 0;
  size_t records = 0;
};
/// Commits kept in GroupCommitStats::log at most (a day of commits 1 s apart).
inline constexpr size_t kMaxCommitLog = 100000;

struct GroupCommitStats {
  size_t records = 0;            ///< records committed
  size_t commits = 0;            ///< updates of the file
  double commit_s = 0;           ///< total time spent in commits
  std::vector<CommitEvent> log;  ///< the first kMaxCommitLog commits, in order
};

/// `stats.log` as the results file's root `commit_log` (schemas/results-layout.md): a JSON
/// list of [start_epoch_s, duration_s, records].
std::string commit_log_json(const GroupCommitStats& stats);

class GroupCommitSink : public ResultSink {
 public:
  /// Starts the writer thread. `store` must outlive this object.
  explicit GroupCommitSink(ResultsStore& store, GroupCommitPacing pacing = {});
  /// close() without throwing: a failure is only logged.
  ~GroupCommitSink() override;
  GroupCommitSink(const GroupCommitSink&) = delete;
  GroupCommitSink& operator=(const GroupCommitSink&) = delete;

  // Queue the record and return (see Note [Group commit]); each first rethrows an earlier
  // commit's failure.
  void mark_running(const CellSpec& cell, const std::vector<int>& ranks) override;
  void mark_skipped(const CellSpec& cell, const std::string& reason) override;
  void complete(const CellSpec& cell, const std::vector<RankResult>& results) override;
  void finish_without_results(const CellSpec& cell, CellStatus status, FailurePhase phase,
                              const std::string& reason) override;

  /// Returns when every record queued before the call is committed; rethrows a failed
  /// commit's exception.
  void progress(const CellSpec& cell, const CellProgress& progress) override;
  void flush() override;

  /// flush(), then stops and joins the writer. Afterwards records throw Error; the store can
  /// be used directly. Idempotent.
  void close();

  [[nodiscard]] GroupCommitStats stats() const;

 private:
  using Record = std::function<void(ResultsStore&)>;
  void enqueue(Record record);
  void write_loop();
  void rethrow_failure_locked() const;

  ResultsStore& store_;
  const GroupCommitPacing pacing_;
  mutable std::mutex mutex_;
  std::condition_variable work_;       ///< writer: records queued, flush asked, or stopping
  std::condition_variable committed_;  ///< flushers: a commit ended (or failed)
  std::vector<Record> queue_;
  size_t queued_total_ = 0;     ///< records ever queued
  size_t committed_total_ = 0;  ///< records ever committed (or dropped by a failure)
  size_t flushers_ = 0;         ///< threads waiting in flush()
  bool stopping_ = false;
  bool closed_ = false;
  std::exception_ptr failure_;
  std::chrono::steady_clock::time_point next_commit_at_{};
  GroupCommitStats stats_;
  std::thread writer_;
};

}  // namespace scalebench
