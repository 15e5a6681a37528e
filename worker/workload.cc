#include "worker/workload.h"

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <limits>

#include "common/base/error.h"
#include "protocol/mpi_check.h"
#include "worker/aoti_model.h"
#include "worker/compiled_twin.h"
#include "worker/scripted_model.h"

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

}  // namespace

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Note [Iterations auto]: the whole-iteration times of rows [first_row, end_row) of the
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

  // Runs the workload's iteration `iteration` in the timer's next row.
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

  bool stop = false;
  if (options.warmup_auto) {  // Note [Warm-up auto]
    WarmupAuto rule(options.max_seconds);
    const auto warmup_start = Clock::now();
    while (!stop && rule.next_window() > 0) {
      const int64_t first = rows;
      for (int64_t k = rule.next_window(); k > 0 && !stop; --k) stop = run_one(rows);
      result.warmup_run = rows;
      stop = stop || vote.finish();  // settled before the group's blocking collective
      if (stop) break;
      std::vector<double> times =
          group_times(*timer, options.group, static_cast<size_t>(first), static_cast<size_t>(rows),
                      seconds_since(warmup_start));
      const double elapsed_s = times.back();
      times.pop_back();
      if (rule.add_window(times, elapsed_s)) break;
    }
    result.warmup_reason = rule.reason();
  } else {
    for (int64_t i = 0; i < warmup && !stop; ++i) {
      stop = run_one(i);
      result.warmup_run = i + 1;
    }
  }
  // The warm-up's last vote is settled before the measured loop, on every rank alike.
  stop = stop || vote.finish();
  vote.set_lockstep(workload.lockstep() || adaptive);
  bool decided = false;  // an adaptive decision ended the loop (not the deadline)
  if (!stop) {
    synchronize_device(options.device);
    if (options.group != MPI_COMM_NULL) MPI_CHECK(MPI_Barrier(options.group));
    const auto energy_start = options.power ? options.power->total_energy_j() : std::nullopt;
    const auto loop_start = Clock::now();
    int64_t measured_run = 0;
    if (!adaptive) {
      for (int64_t i = warmup; i < total && !stop; ++i) {
        stop = run_one(i);
        ++measured_run;
      }
      // Stopped by the deadline before the last measured iteration (a warm-up auto cell
      // ran fewer warm-up rows than `warmup`, so rows are not compared with `total`).
      result.timed_out = stop && measured_run < measured;
    } else {  // Note [Iterations auto]
      AdaptiveOptions rule_options = *options.adaptive;
      rule_options.max_iterations = std::min(rule_options.max_iterations, measured);
      AdaptiveStop rule(rule_options);
      double agreed_elapsed_s = 0.0;  // the group's, as of the last block
      while (!stop) {
        const int64_t block = rule.next_block(agreed_elapsed_s);
        if (block <= 0) {
          result.stop_reason = StopReason::kCap;
          decided = true;
          break;
        }
        const int64_t first = rows;
        for (int64_t k = 0; k < block && !stop; ++k) stop = run_one(warmup + rule.measured() + k);
        stop = stop || vote.finish();
        if (stop) break;
        std::vector<double> times =
            group_times(*timer, options.group, static_cast<size_t>(first),
                        static_cast<size_t>(rows), seconds_since(loop_start));
        agreed_elapsed_s = times.back();
        times.pop_back();
        if (const auto reason = rule.add_block(times, agreed_elapsed_s)) {
          result.stop_reason = *reason;
          decided = true;
          break;
        }
      }
      result.group_interval = rule.interval();
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

ResolvedModel resolve_model(const CellSpec& cell, std::string artifact) {
  ResolvedModel resolved;
  if (!cell.model.aoti.empty()) {  // the package's bytes, as for TorchScript
    resolved.info = std::make_shared<const ModelInfo>(aoti_model_info(cell, std::move(artifact)));
  } else if (!cell.model.torchscript.empty()) {
    if (artifact.empty()) {
      throw CellError(FailurePhase::kModelInit,
                      "TorchScript model " + cell.model.torchscript +
                          ": the assignment carries no module bytes (rank 0 reads "
                          "the file from the branch tree at dispatch)");
    }
    resolved.info =
        std::make_shared<const ModelInfo>(scripted_model_info(cell, std::move(artifact)));
  } else if (cell.compile != CellSpec{}.compile) {  // Note [Compiled twins]
    resolved.info =
        std::make_shared<const ModelInfo>(compiled_twin_info(cell, std::move(artifact)));
  } else {
    // The zoo's entries live as long as the process: share without ownership.
    resolved.info = std::shared_ptr<const ModelInfo>(std::shared_ptr<const ModelInfo>{},
                                                     &find_model(cell.model.zoo));
  }
  resolved.input_shape =
      cell.input_shape.empty() ? resolved.info->default_input_shape : cell.input_shape;
  resolved.num_classes =
      cell.num_classes == 0 ? resolved.info->default_num_classes : cell.num_classes;
  resolved.info->check(resolved.input_shape, resolved.num_classes);
  return resolved;
}

void check_precision(Precision precision, const torch::Device& device) {
  if (precision == Precision::kFp16 && device.is_cpu()) {
    throw CellError(FailurePhase::kModelInit,
                    "precision fp16 is not supported on CPU (no fp16 autocast for CPU kernels): "
                    "use precision bf16 or fp32, or device cuda");
  }
}

AutocastScope::AutocastScope(Precision precision, const torch::Device& device)
    : device_type_(device.type()) {
  if (precision == Precision::kFp32) return;
  active_ = true;
  previous_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_,
                                   precision == Precision::kFp16 ? at::kHalf : at::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

torch::Tensor to_channels_last(const torch::Tensor& tensor) {
  if (tensor.dim() == 4) return tensor.contiguous(torch::MemoryFormat::ChannelsLast);
  if (tensor.dim() == 5) return tensor.contiguous(torch::MemoryFormat::ChannelsLast3d);
  return tensor;
}

void module_to_channels_last(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& parameter : module.parameters()) parameter.set_data(to_channels_last(parameter));
  for (auto& buffer : module.buffers()) buffer.set_data(to_channels_last(buffer));
}

void set_tf32(bool allow) {
  at::globalContext().setAllowTF32CuBLAS(allow);
  at::globalContext().setAllowTF32CuDNN(allow);
}

// The checksum's weight repeats every 13 elements, so the elements are summed in 13 columns
// (a [n/13, 13] view; the < 13 remaining ones alone) and each column sum is weighted once:
// one pass over the parameters in their own dtype, accumulated in double, instead of a
// double copy, an index tensor and an fmod per element (which made it the largest per-cell
// cost of tiny cells: docs/performance.md).
double parameter_checksum(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  constexpr int64_t kPeriod = 13;
  double checksum = 0.0;
  int64_t index = 0;
  for (const auto& parameter : module.parameters()) {
    const auto flat = parameter.detach().flatten();
    const auto terms = at::add(flat.abs(), flat, 0.5);  // |w| + w/2
    const int64_t whole = flat.numel() / kPeriod * kPeriod;
    const auto columns =
        terms.narrow(0, 0, whole).view({-1, kPeriod}).sum(0, false, torch::kDouble);
    const auto rest = terms.narrow(0, whole, flat.numel() - whole).to(torch::kDouble);
    const auto column_sums = columns.cpu();
    const auto rest_values = rest.cpu();
    const double* sums = column_sums.data_ptr<double>();
    const double* tail = rest_values.data_ptr<double>();
    for (int64_t j = 0; j < kPeriod; ++j) {
      const double weight = 1.0 + static_cast<double>((j + index * 31) % kPeriod) / kPeriod;
      double column = sums[j];
      if (j < rest_values.numel()) column += tail[j];
      checksum += column * weight;
    }
    ++index;
  }
  return checksum;
}

}  // namespace scalebench
