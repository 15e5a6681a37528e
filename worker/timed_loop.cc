// The one timing loop of built-in cells (Note [Measured blocks] in common/cell/block_rules.h):
// warm-up and measured iterations of a Workload, each a loop of blocks that a rule sizes.
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>

#include "common/cell/block_rules.h"
#include "protocol/mpi_check.h"
#include "worker/workload.h"

namespace scalebench {
namespace {

using Clock = std::chrono::steady_clock;

/// The pipelined stop vote of Note [Cooperative timeout].
class StopVote {
 public:
  StopVote(MPI_Comm group, bool lockstep) : group_(group), lockstep_(lockstep) {}
  ~StopVote() {
    if (pending_) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  StopVote(const StopVote&) = delete;
  StopVote& operator=(const StopVote&) = delete;

  /// Changes whether the group votes, between loops (no vote may be pending): `warmup: auto`
  /// votes during its warm-up only; a fixed measured loop of inference is independent again.
  void set_lockstep(bool lockstep) {
    if (!pending_) lockstep_ = lockstep;
  }

  /// Called after every iteration with this rank's view; returns whether to stop now.
  bool after_iteration(bool deadline_passed) {
    if (!lockstep_ || group_ == MPI_COMM_NULL) return deadline_passed;
    bool stop = false;
    if (pending_) {
      MPI_CHECK(MPI_Wait(&request_, MPI_STATUS_IGNORE));
      pending_ = false;
      stop = vote_result_ != 0;
    }
    if (!stop) {
      vote_mine_ = deadline_passed ? 1 : 0;
      MPI_CHECK(MPI_Iallreduce(&vote_mine_, &vote_result_, 1, MPI_INT, MPI_MAX, group_, &request_));
      pending_ = true;
    }
    return stop;
  }
  /// Completes the last vote and returns its result (false when none was pending).
  bool finish() {
    if (!pending_) return false;
    MPI_CHECK(MPI_Wait(&request_, MPI_STATUS_IGNORE));
    pending_ = false;
    return vote_result_ != 0;
  }

 private:
  MPI_Comm group_;
  bool lockstep_;
  bool pending_ = false;
  int vote_mine_ = 0;
  int vote_result_ = 0;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

/// Appends one row of Note [Shared cell clock]'s bucket times (seconds since `origin`).
/// The layout of the first row decides the bucket count; a row with another count (none:
/// a workload without buckets) is not recorded.
void record_buckets(const std::vector<BucketTiming>& buckets, Clock::time_point origin,
                    LoopResult& result) {
  if (buckets.empty()) return;
  if (result.bucket_bytes.empty()) {
    for (const auto& bucket : buckets) result.bucket_bytes.push_back(bucket.bytes);
  }
  if (buckets.size() != result.bucket_bytes.size()) return;
  for (const auto& bucket : buckets) {
    result.bucket_times_s.push_back(
        std::chrono::duration<double>(bucket.launched - origin).count());
    result.bucket_times_s.push_back(
        bucket.completed ? std::chrono::duration<double>(*bucket.completed - origin).count()
                         : std::numeric_limits<double>::quiet_NaN());
  }
}

/// Note [Measured blocks]: the whole-iteration times of rows [first_row, end_row) of the
/// group, per row the slowest rank's, with `elapsed_s` (the slowest rank's too) appended:
/// every rank gets the same figures and so makes the same decision.
std::vector<double> group_times(PhaseTimer& timer, MPI_Comm group, size_t first_row, size_t end_row,
                                double elapsed_s) {
  std::vector<double> values = timer.resolve_phase(timer.phases() - 1, first_row, end_row);
  values.push_back(elapsed_s);
  if (group != MPI_COMM_NULL) {
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                            MPI_DOUBLE, MPI_MAX, group));
  }
  return values;
}

/// How one loop of blocks ended (Note [Measured blocks]).
struct BlocksRun {
  int64_t iterations = 0;  ///< iterations this loop ran
  bool stopped = false;    ///< the group stopped it (the deadline), not its rule
  bool decided = false;    ///< its rule ended it
};

/// Note [Measured blocks]: runs blocks of `run_one(first_index + k)` (k: the iterations this
/// loop ran before) as `rule` asks, handing it the group's times of each block, until the rule
/// is done or `run_one` says stop. `rows` counts the timer's rows (shared by the loops).
template <typename RunOne>
BlocksRun run_blocks(BlockRule& rule, int64_t first_index, RunOne&& run_one, StopVote& vote,
                     PhaseTimer& timer, MPI_Comm group, const int64_t& rows) {
  BlocksRun loop;
  const auto start = Clock::now();
  double agreed_elapsed_s = 0.0;  // the group's, as of the last block
  while (!loop.stopped) {
    const int64_t block = rule.next_block(agreed_elapsed_s);
    if (block <= 0) {
      loop.decided = true;
      break;
    }
    const int64_t first_row = rows;
    for (int64_t k = 0; k < block && !loop.stopped; ++k) {
      loop.stopped = run_one(first_index + loop.iterations);
      ++loop.iterations;
    }
    if (!rule.needs_times()) {
      if (!loop.stopped) loop.decided = rule.add_block({}, 0.0);
      continue;
    }
    loop.stopped = loop.stopped || vote.finish();  // settled before the blocking collective
    if (loop.stopped) break;
    std::vector<double> times = group_times(timer, group, static_cast<size_t>(first_row),
                                            static_cast<size_t>(rows), seconds_since(start));
    agreed_elapsed_s = times.back();
    times.pop_back();
    if (rule.add_block(times, agreed_elapsed_s)) {
      loop.decided = true;
      break;
    }
  }
  return loop;
}

}  // namespace

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

LoopResult run_timed_loop(Workload& workload, const LoopOptions& options) {
  // Fixed counts, or the caps of the auto rules. The measured iterations of an adaptive
  // cell start at index `warmup` whatever warm-up ran, so a workload that derives its
  // samples from the index (inference shards) sees the indices of a fixed cell.
  const int64_t warmup = workload.warmup_iterations();
  int64_t measured = workload.measured_iterations();
  const bool adaptive = options.adaptive.has_value();
  // The ranks of an adaptive cell run the same blocks: the shard with the fewest batches
  // caps them all, and every stop is the group's.
  if (adaptive && options.group != MPI_COMM_NULL) {
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &measured, 1, MPI_INT64_T, MPI_MIN, options.group));
  }
  const int64_t total = warmup + measured;
  auto timer = make_phase_timer(options.device, workload.phases().size(),
                                static_cast<size_t>(std::max<int64_t>(total, 1)));
  StopVote vote(options.group, workload.lockstep() || adaptive || options.warmup_auto);
  LoopResult result;
  // Note [Shared cell clock]: the origin, after the device is idle and the group met.
  synchronize_device(options.device);
  if (options.group != MPI_COMM_NULL) MPI_CHECK(MPI_Barrier(options.group));
  timer->mark_origin();
  const auto origin = Clock::now();
  result.origin_epoch_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();

  // Runs the workload's iteration `iteration` in the timer's next row; true: stop now.
  int64_t rows = 0;
  auto run_one = [&](int64_t iteration) {
    const auto start = Clock::now();
    workload.run_iteration(iteration, *timer);
    timer->next_iteration();
    record_buckets(workload.last_bucket_timings(), origin, result);
    if (rows == 0) {
      synchronize_device(options.device);
      result.first_iteration_s = seconds_since(start);
    }
    result.iterations_run = ++rows;
    if (options.on_iteration) {
      if (iteration < warmup) {
        options.on_iteration("warmup", iteration + 1, warmup);
      } else {
        options.on_iteration("measured", iteration + 1 - warmup, measured);
      }
    }
    return vote.after_iteration(Clock::now() >= options.deadline);
  };

  // Warm-up: a fixed count, or Note [Warm-up auto]'s windows.
  std::unique_ptr<BlockRule> warmup_rule;
  WarmupBlocks* warmup_auto = nullptr;
  if (options.warmup_auto) {
    auto rule = std::make_unique<WarmupBlocks>(options.max_seconds);
    warmup_auto = rule.get();
    warmup_rule = std::move(rule);
  } else {
    warmup_rule = std::make_unique<FixedBlocks>(warmup);
  }
  const BlocksRun warmup_run =
      run_blocks(*warmup_rule, 0, run_one, vote, *timer, options.group, rows);
  result.warmup_run = warmup_run.iterations;
  if (warmup_auto != nullptr) result.warmup_reason = warmup_auto->reason();
  // The warm-up's last vote is settled before the measured loop, on every rank alike.
  bool stop = warmup_run.stopped || vote.finish();
  vote.set_lockstep(workload.lockstep() || adaptive);
  bool decided = false;  // an adaptive decision ended the loop (not the deadline)
  if (!stop) {
    synchronize_device(options.device);
    if (options.group != MPI_COMM_NULL) MPI_CHECK(MPI_Barrier(options.group));
    const auto energy_start = options.power ? options.power->total_energy_j() : std::nullopt;
    const auto loop_start = Clock::now();
    // Measured: a fixed count, or Note [Iterations auto]'s blocks within the shard's batches.
    std::optional<AdaptiveBlocks> adaptive_rule;
    std::optional<FixedBlocks> fixed_rule;
    BlockRule* rule = nullptr;
    if (adaptive) {
      AdaptiveOptions rule_options = *options.adaptive;
      rule_options.max_iterations = std::min(rule_options.max_iterations, measured);
      rule = &adaptive_rule.emplace(rule_options);
    } else {
      rule = &fixed_rule.emplace(measured);
    }
    const BlocksRun measured_run =
        run_blocks(*rule, warmup, run_one, vote, *timer, options.group, rows);
    stop = measured_run.stopped;
    if (adaptive) {
      decided = measured_run.decided;
      if (decided) result.stop_reason = adaptive_rule->decision().value_or(StopReason::kCap);
      result.group_interval = adaptive_rule->interval();
    } else {
      // Stopped by the deadline before the last measured iteration (a warm-up auto cell
      // ran fewer warm-up rows than `warmup`, so rows are not compared with `total`).
      result.timed_out = stop && measured_run.iterations < measured;
    }
    synchronize_device(options.device);
    result.loop_wall_s = seconds_since(loop_start);
    result.power_metrics = loop_power_metrics(options.power, energy_start, result.loop_wall_s);
    vote.finish();
  }
  if (adaptive) {
    result.timed_out = stop && !decided;
  } else if (result.iterations_run <= result.warmup_run) {
    // The deadline ended the warm-up (before every planned iteration: as for fixed counts).
    result.timed_out = stop && result.iterations_run < total;
  }
  result.timings_s = timer->resolve();
  result.phase_starts_s = timer->resolve_begins();
  return result;
}

}  // namespace scalebench
