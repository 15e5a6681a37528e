#include "protocol/group_batch_search.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <utility>

#include "common/base/logging.h"
#include "common/cell/batch_refinement.h"

namespace scalebench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

/// How one probe of the loop ended.
enum class ProbeEnd {
  kFits,
  kDoesNotFit,
  kFailed,    ///< a rank failed for a reason other than memory
  kTimedOut,  ///< cut by the search's deadline
  kNoTime,    ///< not started: predicted to end past the deadline
};

/// The boundary the probes hold, in words: "batch 1611 fits, 3222 did not".
std::string boundary_text(const BatchSearch& search) {
  std::ostringstream text;
  if (search.max_ok() > 0) {
    text << "batch " << search.max_ok() << " fits";
  } else {
    text << "no batch fit yet";
  }
  if (search.first_failed() > 0) {
    text << ", " << search.first_failed() << " did not";
  } else {
    text << ", none tried did not";
  }
  return text.str();
}

/// The loop's state between probes; one per search.
class SearchLoop {
 public:
  SearchLoop(const ProbeOneBatch& probe, Clock::time_point start, Clock::time_point deadline,
             GroupSearchResult& result)
      : probe_(probe), start_(start), deadline_(deadline), result_(result) {}

  /// Probes `batch`, keeping a probe that completed in result_.probes.
  ProbeEnd run(int64_t batch) {
    const auto now = Clock::now();
    if (last_batch_ > 0) {
      const double predicted_s =
          last_probe_s_ * static_cast<double>(batch) / static_cast<double>(last_batch_);
      if (now + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(predicted_s)) >
          deadline_) {
        predicted_s_ = predicted_s;
        return ProbeEnd::kNoTime;
      }
    }
    GroupProbeRun run = probe_(batch, deadline_);
    last_probe_s_ = seconds_between(now, Clock::now());
    last_batch_ = batch;
    if (run.outcome.failed) {
      last_failure_ = std::move(run.local_failure);
      return ProbeEnd::kFailed;
    }
    if (run.outcome.timed_out) return ProbeEnd::kTimedOut;
    result_.probes.push_back(run.outcome.probe);
    SB_LOG(info) << "batch search: " << batch << " " << to_string(run.outcome.probe.status)
                 << ", median " << run.outcome.probe.median_s * 1e3 << " ms, peak "
                 << run.outcome.probe.peak_memory_bytes / (1 << 20) << " MiB";
    return run.outcome.probe.status == ProbeStatus::kOk ? ProbeEnd::kFits : ProbeEnd::kDoesNotFit;
  }

  /// Note [Search time]: why the search stops at `batch`, with the boundary it keeps.
  std::string stopped_text(ProbeEnd end, int64_t batch, const BatchSearch& search) const {
    std::ostringstream text;
    text.precision(3);
    text << "batch_size auto: the search stopped for time before its boundary was within "
            "batch_precision ("
         << boundary_text(search) << "; ";
    if (end == ProbeEnd::kNoTime) {
      text << "the probe of batch " << batch << ", about " << predicted_s_ << " s, would end";
    } else {
      text << "the probe of batch " << batch << " ran";
    }
    text << " past the search's share of timeout_s, " << seconds_between(start_, deadline_)
         << " s); raise timeout_s or lower max_batch for a finer boundary";
    return text.str();
  }

  [[nodiscard]] const std::string& last_failure() const { return last_failure_; }

 private:
  const ProbeOneBatch& probe_;
  Clock::time_point start_;
  Clock::time_point deadline_;
  GroupSearchResult& result_;
  double last_probe_s_ = 0;
  int64_t last_batch_ = 0;
  double predicted_s_ = 0;
  std::string last_failure_;
};

/// Note [Batch search start] (group_batch_search.h): after a non-memory failure of the probe
/// of `batch`, restarts `search` at twice that batch when nothing has fit yet and max_batch is
/// not reached; false when the failure must fail the cell. Every rank decides alike.
bool move_start_up(BatchSearch& search, int64_t batch, const CellSpec& cell,
                   const std::string& failure, GroupSearchResult& result) {
  if (search.max_ok() > 0 || batch >= cell.max_batch) return false;
  const int64_t start = std::min(batch * 2, cell.max_batch);
  search = BatchSearch(start, cell.max_batch, cell.batch_precision);
  result.start_batch = start;
  if (result.start_reason.empty()) {  // the first failure says why; later ones only move on
    const std::string detail = failure.substr(0, failure.find('\n'));
    result.start_reason =
        "min_batch: batch " + std::to_string(batch) + " failed for a reason other than memory" +
        (detail.empty() ? std::string(" (on another rank)") : " (" + detail + ")");
  }
  SB_LOG(info) << "batch search: " << batch << " failed (not memory); starting at " << start;
  return true;
}

void fail(GroupSearchResult& result, CellStatus status, std::string reason) {
  result.failed = true;
  result.status = status;
  result.reason = std::move(reason);
}

}  // namespace

Clock::time_point search_deadline(const CellSpec& cell, Clock::time_point start,
                                  Clock::time_point cell_deadline) {
  const double total_s = seconds_between(start, cell_deadline);
  if (total_s <= 0) return cell_deadline;
  const double reserve_s = std::clamp(1.25 * cell.max_seconds, 0.25 * total_s, 0.5 * total_s);
  return start + std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>(total_s - reserve_s));
}

GroupSearchResult search_group_batch(const CellSpec& cell, double budget_bytes,
                                     const ProbeOneBatch& probe, Clock::time_point cell_deadline,
                                     MPI_Comm group) {
  GroupSearchResult result;
  const auto start = Clock::now();
  SearchLoop loop(probe, start, search_deadline(cell, start, cell_deadline), result);
  BatchSearch search(cell.min_batch, cell.max_batch, cell.batch_precision);
  while (const auto next = search.next()) {
    const ProbeEnd end = loop.run(*next);
    if (end == ProbeEnd::kFits || end == ProbeEnd::kDoesNotFit) {
      search.record(end == ProbeEnd::kFits);
      continue;
    }
    if (end == ProbeEnd::kFailed) {
      if (move_start_up(search, *next, cell, loop.last_failure(), result)) continue;
      fail(result, CellStatus::kFailed, probe_failed_reason(*next, loop.last_failure()));
      break;
    }
    if (search.max_ok() == 0) {  // out of time with nothing that fits: the cell times out
      fail(result, CellStatus::kTimeout, search_timeout_reason(*next, result.probes.size()));
      break;
    }
    result.stopped_reason = loop.stopped_text(end, *next, search);
    SB_LOG(warning) << result.stopped_reason;
    break;
  }
  if (!result.failed) {
    result.choice = choose_batch(result.probes, cell, budget_bytes, group);
    if (result.probes.empty()) {
      fail(result, CellStatus::kFailed, "batch_size auto: the search ran no probe");
    } else if (result.choice.figures.max_batch_ok == 0) {
      fail(result, CellStatus::kOom,
           nothing_fits_reason(cell, result.probes.front(), result.choice.budget_bytes));
    }
  }
  // Note [Batch refinement]: one more probe at the largest batch the memory line puts inside
  // the margin, when the search measured it not and has the time. The search already has its
  // answer: a refinement probe that fails, for any reason, is dropped.
  if (!result.failed && result.stopped_reason.empty()) {
    const auto refined =
        refined_batch(result.probes, {.safety_margin = cell.safety_margin,
                                      .latency_slo_s = cell.latency_slo_ms / 1000.0,
                                      .memory_budget_bytes = result.choice.budget_bytes});
    if (refined) {
      SB_LOG(info) << "batch search: refining inside the margin at " << *refined;
      const ProbeEnd end = loop.run(*refined);
      if (end == ProbeEnd::kFits) result.refined_batch = *refined;
      if (end != ProbeEnd::kFits && end != ProbeEnd::kDoesNotFit) {
        SB_LOG(warning) << "batch search: the refinement probe at " << *refined
                        << " did not complete; keeping the search's choice";
      }
      result.choice = choose_batch(result.probes, cell, budget_bytes, group);
    }
  }
  result.search_s = seconds_between(start, Clock::now());
  return result;
}

void record_search(const GroupSearchResult& search, double budget_bytes, RankResult& result) {
  result.probes = search.probes;
  result.metrics["memory_budget_bytes"] = budget_bytes;
  result.metrics["batch_search_s"] = search.search_s;
  if (search.start_batch > 0) {  // Note [Batch search start]
    result.metrics["batch_search_start"] = static_cast<double>(search.start_batch);
    result.effective["min_batch"] = std::to_string(search.start_batch);
    result.ineffective_reasons.push_back(search.start_reason + ", so the search started at " +
                                         std::to_string(search.start_batch));
  }
  if (search.refined_batch > 0) {  // Note [Batch refinement] in common/cell/batch_refinement.h
    result.metrics["batch_refined"] = static_cast<double>(search.refined_batch);
  }
  if (!search.stopped_reason.empty()) {  // Note [Search time]: the boundary kept, and why
    result.ineffective_reasons.push_back(search.stopped_reason);
  }
}

}  // namespace scalebench
