#include "orchestrator/group_commit_sink.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/base/error.h"
#include "common/base/logging.h"
#include "results/provenance.h"

namespace scalebench {

using Clock = std::chrono::steady_clock;

GroupCommitSink::GroupCommitSink(ResultsStore& store, GroupCommitPacing pacing)
    : store_(store), pacing_(pacing) {
  if (!(pacing_.duty > 0 && pacing_.duty <= 1) || !(pacing_.max_delay_s >= 0)) {
    throw Error("GroupCommitPacing: duty must be in (0, 1] and max_delay_s >= 0");
  }
  writer_ = std::thread([this] { write_loop(); });
}

GroupCommitSink::~GroupCommitSink() {
  try {
    close();
  } catch (const std::exception& e) {
    SB_LOG(error) << "results not written at exit: " << e.what();
  }
}

void GroupCommitSink::rethrow_failure_locked() const {
  if (failure_) std::rethrow_exception(failure_);
  if (closed_) throw Error("GroupCommitSink: record after close()");
}

void GroupCommitSink::enqueue(Record record) {
  {
    const std::lock_guard lock(mutex_);
    rethrow_failure_locked();
    queue_.push_back(std::move(record));
    ++queued_total_;
  }
  work_.notify_one();
}

void GroupCommitSink::mark_running(const CellSpec& cell, const std::vector<int>& ranks) {
  enqueue([cell, ranks, at = iso8601_utc_now()](ResultsStore& store) {
    store.mark_running(cell, ranks, at);
  });
}

void GroupCommitSink::mark_skipped(const CellSpec& cell, const std::string& reason) {
  enqueue([cell, reason, at = iso8601_utc_now()](ResultsStore& store) {
    store.mark_skipped(cell, reason, at);
  });
}

void GroupCommitSink::complete(const CellSpec& cell, const std::vector<RankResult>& results) {
  enqueue([cell, results, at = iso8601_utc_now()](ResultsStore& store) {
    store.complete_cell(cell, results, at);
  });
}

void GroupCommitSink::finish_without_results(const CellSpec& cell, CellStatus status,
                                             FailurePhase phase, const std::string& reason) {
  enqueue([cell, status, phase, reason, at = iso8601_utc_now()](ResultsStore& store) {
    store.finish_cell_without_results(cell, status, phase, reason, at);
  });
}

void GroupCommitSink::progress(const CellSpec& cell, const CellProgress& progress) {
  enqueue([cell, progress, at = iso8601_utc_now()](ResultsStore& store) {
    store.record_progress(cell, progress, at);
  });
}

void GroupCommitSink::flush() {
  std::unique_lock lock(mutex_);
  if (closed_ && !failure_) return;  // close() flushed everything
  const size_t target = queued_total_;
  ++flushers_;
  work_.notify_one();
  committed_.wait(lock, [&] { return committed_total_ >= target || failure_; });
  --flushers_;
  if (failure_) std::rethrow_exception(failure_);
}

void GroupCommitSink::close() {
  {
    const std::lock_guard lock(mutex_);
    if (closed_) {
      if (failure_) std::rethrow_exception(failure_);
      return;
    }
    stopping_ = true;
  }
  work_.notify_one();
  if (writer_.joinable()) writer_.join();
  const std::lock_guard lock(mutex_);
  closed_ = true;
  SB_LOG(debug) << "results: " << stats_.records << " records in " << stats_.commits << " commits, "
                << stats_.commit_s << " s committing";
  if (failure_) std::rethrow_exception(failure_);
}

std::string commit_log_json(const GroupCommitStats& stats) {
  nlohmann::json log = nlohmann::json::array();
  for (const auto& c : stats.log) log.push_back({c.start_epoch_s, c.duration_s, c.records});
  return log.dump();
}

GroupCommitStats GroupCommitSink::stats() const {
  const std::lock_guard lock(mutex_);
  return stats_;
}

void GroupCommitSink::write_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    // Pacing (Note [Group commit]): a flush or the stop commits at once.
    work_.wait_until(lock, next_commit_at_, [&] { return stopping_ || flushers_ > 0; });
    std::vector<Record> records = std::move(queue_);
    queue_.clear();
    lock.unlock();
    const auto start = Clock::now();
    const double start_epoch_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::exception_ptr error;
    try {
      store_.batch([&] {
        for (const auto& record : records) record(store_);
      });
    } catch (...) {
      error = std::current_exception();
    }
    const auto end = Clock::now();
    lock.lock();
    committed_total_ += records.size();
    if (error) {
      // Nothing more is written: the records queued later are dropped, like this group.
      failure_ = error;
      committed_total_ = queued_total_;
      queue_.clear();
      committed_.notify_all();
      return;
    }
    const std::chrono::duration<double> took = end - start;
    stats_.records += records.size();
    ++stats_.commits;
    stats_.commit_s += took.count();
    if (stats_.log.size() < kMaxCommitLog) {
      stats_.log.push_back({start_epoch_s, took.count(), records.size()});
    }
    const double pause_s =
        std::min(pacing_.max_delay_s, took.count() * (1.0 - pacing_.duty) / pacing_.duty);
    next_commit_at_ =
        end + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(pause_s));
    committed_.notify_all();
  }
}

}  // namespace scalebench
