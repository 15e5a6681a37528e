#include "worker/torch_cell_runner.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <tuple>
#include <utility>

#include "common/base/deadline_watchdog.h"
#include "common/base/error.h"
#include "common/base/logging.h"
#include "common/cell/effective_settings.h"
#include "common/cell/stats.h"
#include "common/cell/zoo_names.h"
#include "protocol/cell_progress_reporter.h"
#include "protocol/mpi_check.h"
#include "worker/batch_probe.h"
#include "worker/cpu_allocation_counter.h"
#include "worker/cpu_threads.h"
#include "worker/device_selection.h"
#include "worker/infer_workload.h"
#include "worker/memory_stats.h"
#include "worker/op_profiler.h"
#include "worker/replay_workload.h"
#include "worker/train_workload.h"
#include "worker/workload.h"

namespace scalebench {

namespace {

/// Severity order for the group agreement: the group reports the worst status.
int severity(CellStatus status) {
  switch (status) {
    case CellStatus::kOk:
      return 0;
    case CellStatus::kTimeout:
      return 1;
    case CellStatus::kOom:
      return 2;
    default:
      return 3;
  }
}

// Note [Collective watchdog]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Workers check the cell's deadline between iterations; a rank blocked in a collective
// whose peer died or hangs never gets there. While the timed loop runs, a DeadlineWatchdog
// waits until timeout_s + kCollectiveGrace and then aborts the workload's collectives
// (Workload::abort_collectives): on NCCL, ncclCommAbort ends the blocked kernels and the
// rank's next NCCL call throws, so the rank records the cell `timeout` (phase
// communication) and goes on to the next cell; rank 0 sees the ranks come back (Note [Late
// cells]). MPI cannot cancel a collective (abort returns false): there rank 0's
// --hang-limit ends the job, as before.
constexpr std::chrono::seconds kCollectiveGrace{10};

/// Note [Requested vs effective]: the facts of `device` for the cell's switches.
DeviceFacts device_facts(const CellSpec& cell, const torch::Device& device) {
  DeviceFacts facts;
  facts.sample_rank = cell.input_shape.size();
  if (facts.sample_rank == 0 && cell.model.torchscript.empty()) {
    if (const ZooModelInfo* model = find_zoo_model(cell.model.zoo)) {
      facts.sample_rank = model->default_shape.size();
    }
  }
#ifdef SCALEBENCH_HAVE_CUDA
  if (device.is_cuda()) {
    facts.cuda = true;
    std::tie(facts.compute_major, facts.compute_minor) = cuda_compute_capability(device.index());
    facts.cudnn = at::globalContext().hasCuDNN();
  }
#else
  (void)device;
#endif
  return facts;
}

/// Applies the device-dependent switches of `cell` that take effect (see effective_settings)
/// and records requested vs effective in `result`; returns the cell as it runs.
CellSpec apply_switches(const CellSpec& cell, const torch::Device& device, RankResult& result) {
  const auto effects = effective_settings(cell, device_facts(cell, device));
  for (const auto& effect : effects) {
    result.effective[effect.key] = setting_text(effect.effective);
    if (!effect.reason.empty()) result.ineffective_reasons.push_back(effect.reason);
  }
  CellSpec effective = with_effective_settings(cell, effects);
  set_tf32(effective.tf32);
  at::globalContext().setBenchmarkCuDNN(effective.cudnn_benchmark);
  at::globalContext().setDeterministicCuDNN(effective.deterministic);
  at::globalContext().setDeterministicAlgorithms(effective.deterministic, /*warn_only=*/false);
  return effective;
}

/// Records the exception in flight as the rank's failure.
void record_failure(RankResult& result, FailurePhase phase) {
  result.failed_phase = phase;
  result.status = CellStatus::kFailed;
  try {
    throw;
  } catch (const OutOfMemoryError& error) {
    result.status = CellStatus::kOom;
    result.failed_phase = error.phase();
    result.reason = error.what();
  } catch (const CellError& error) {
    result.failed_phase = error.phase();
    result.reason = error.what();
  } catch (const c10::OutOfMemoryError& error) {
    result.status = CellStatus::kOom;
    result.reason = error.what_without_backtrace();
  } catch (const c10::Error& error) {
    result.reason = error.what_without_backtrace();
    if (is_oom_text(result.reason)) result.status = CellStatus::kOom;
  } catch (const std::exception& error) {
    result.reason = error.what();
    if (is_oom_text(result.reason)) result.status = CellStatus::kOom;
  } catch (...) {
    result.reason = "unknown exception";
  }
}

/// Counting of CPU allocations for the lifetime of one cell (when `on`).
class CpuAllocationCounting {
 public:
  explicit CpuAllocationCounting(bool on) : on_(on) {
    if (on_) start_counting_cpu_allocations();
  }
  ~CpuAllocationCounting() {
    if (on_) stop_counting_cpu_allocations();
  }
  CpuAllocationCounting(const CpuAllocationCounting&) = delete;
  CpuAllocationCounting& operator=(const CpuAllocationCounting&) = delete;

 private:
  bool on_;
};

/// memory_limit_mb: a peak above it records the rank `oom` with the batch and the figures
/// (after the loop: the timings are kept). Nothing when no limit is set.
void check_memory_limit(const CellSpec& cell, const torch::Device& device, RankResult& result) {
  const double budget = memory_budget_bytes(cell.memory_limit_mb, device, 1, false);
  if (budget <= 0) return;
  if (cell.batch_size != kBatchAuto) result.metrics["memory_budget_bytes"] = budget;
  const double peak = budgeted_peak_bytes(result.metrics, device);
  if (peak <= budget || result.status != CellStatus::kOk) return;
  const auto batch = result.metrics.find("batch_size");
  const auto mib = [](double bytes) { return std::to_string(std::llround(bytes / (1 << 20))); };
  result.status = CellStatus::kOom;
  result.failed_phase = FailurePhase::kLoop;
  result.reason =
      std::string("peak memory ") + mib(peak) + " MiB (allocated tensors, batch " +
      std::to_string(batch == result.metrics.end() ? cell.batch_size
                                                   : static_cast<int64_t>(batch->second)) +
      ") is above memory_limit_mb " + mib(budget) +
      " MiB; lower the batch size or raise memory_limit_mb";
}

/// See Note [Group agreement]. Returns true when every rank is ok; otherwise marks an ok
/// rank as failed in phase "group" naming the worst rank.
bool agree(RankResult& result, MPI_Comm group, const std::string& when) {
  struct {
    int severity;
    int rank;
  } mine{severity(result.status), result.group_rank}, worst{};
  const int rc = MPI_Allreduce(&mine, &worst, 1, MPI_2INT, MPI_MAXLOC, group);
  if (rc != MPI_SUCCESS) {
    throw FatalError("the group agreement " + when + " failed (" + mpi_error_string(rc) +
                     "): the cell's group communicator is unusable");
  }
  if (worst.severity == 0) return true;
  if (result.status == CellStatus::kOk) {
    result.status = worst.severity == 1 ? CellStatus::kTimeout : CellStatus::kFailed;
    result.failed_phase = FailurePhase::kGroup;
    result.reason = "group rank " + std::to_string(worst.rank) + " did not succeed " + when;
  }
  return false;
}

class TorchCellRunner : public CellRunner {
 public:
  std::string device_name(const WorkerContext& context) override {
    CellSpec probe;
    try {
      return describe(select_device(probe.device, context));
    } catch (const CellError&) {
      return "cpu";
    }
  }

  RankResult run(const Assignment& assignment, MPI_Comm group,
                 const WorkerContext& context) override {
    const CellSpec& cell = assignment.cell;
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(cell.timeout_s));
    RankResult result;
    result.cell_id = cell.cell_id;
    result.world_rank = context.world_rank;
    result.host = context.host;
    MPI_CHECK(MPI_Comm_rank(group, &result.group_rank));

    // Note [Counting CPU allocations]: a cell with a budget judges CPU memory by its tensors.
    const CpuAllocationCounting counting(cell.batch_size == kBatchAuto || cell.memory_limit_mb > 0);
    torch::Device device = torch::kCPU;
    std::unique_ptr<Workload> workload;
    bool rss_reset = false;
    FailurePhase phase = FailurePhase::kDevice;
    try {
      device = select_device(cell.device, context);
      make_current(device);
      result.device = describe(device);
      result.metrics.merge(device_metrics(device));
      phase = FailurePhase::kSetup;
      const int threads =
          configure_cpu_threads(context.node_cores, context.local_workers, cell.cpu_threads);
      result.metrics["cpu_threads"] = threads;
      // Note [CPU oversubscription] (results/cell_summary.cc)
      result.metrics["node_cores"] = context.node_cores;
      result.metrics["node_workers"] = context.local_workers;
      result.metrics["mpi_comm_threads"] = 0;  // a training cell on MPI reports its thread
      result.effective["cpu_threads"] = std::to_string(threads);
      Assignment effective = assignment;  // what runs: Note [Requested vs effective]
      effective.cell = apply_switches(cell, device, result);
      if (cell.batch_size == kBatchAuto) {  // Note [Batch search]
        phase = FailurePhase::kBatchSearch;
        BatchSearchOutcome search;
        try {
          search_batch(effective, device, group, context.local_workers, deadline, search);
        } catch (...) {
          record_search(search.search, search.budget_bytes, result);
          throw;
        }
        record_search(search.search, search.budget_bytes, result);
        effective.cell.batch_size = search.chosen_batch;
        result.metrics["batch_size"] = static_cast<double>(search.chosen_batch);
        result.effective["batch_size"] = std::to_string(search.chosen_batch);
        phase = FailurePhase::kSetup;
      }
      // The peak is this cell's, not what earlier cells left cached (a CPU cell without a
      // budget skips it: malloc_trim costs milliseconds, and its peak_rss_bytes is only
      // informative, Note [Counting CPU allocations]).
      if (device.is_cuda() || counting_cpu_allocations()) release_cached_memory(device);
      rss_reset = reset_peak_memory(device);
      phase = FailurePhase::kModelInit;
      workload = !cell.model.replay.empty()  ? make_replay_workload(effective, device, group)
                 : cell.mode == Mode::kTrain ? make_train_workload(effective, device, group)
                                             : make_infer_workload(effective, device, group);
      result.phases = workload->phases();
    } catch (...) {
      record_failure(result, phase);
    }
    if (!agree(result, group, "before the timed loop")) return result;
    std::atomic<bool> collectives_aborted{false};
    try {
      phase = FailurePhase::kConnect;
      workload->connect();
      phase = FailurePhase::kLoop;
      {
        // Note [Collective watchdog]
        const DeadlineWatchdog watchdog(
            deadline + kCollectiveGrace, [&workload, &collectives_aborted, &cell] {
              if (workload->abort_collectives()) {
                collectives_aborted = true;
                SB_LOG(error) << "cell " << cell.cell_id << ": still in the timed loop "
                              << kCollectiveGrace.count() << " s after timeout_s; its communicator "
                              << "was aborted (ncclCommAbort)";
              }
            });
        run_loop(*workload, device, group, deadline, cell, result);
      }
      phase = FailurePhase::kMetrics;
      workload->add_metrics(result.metrics);
      result.metrics.merge(peak_memory_metrics(device, rss_reset));
      check_memory_limit(cell, device, result);
    } catch (...) {
      record_failure(result, phase);
    }
    if (collectives_aborted) {
      result.status = CellStatus::kTimeout;
      result.failed_phase = FailurePhase::kCommunication;
      result.reason = "a collective did not complete within timeout_s + " +
                      std::to_string(kCollectiveGrace.count()) +
                      " s; the worker aborted its NCCL communicator (ncclCommAbort) and went on";
    }
    if (!agree(result, group, "in the timed loop")) return result;
    if (cell.validate) {
      try {  // Note [Accuracy validation]: after the peak memory was read, outside the timers
        result.accuracy = workload->validate(result.metrics);
        result.validation_outputs = workload->outputs_for_baseline();
      } catch (...) {
        record_failure(result, FailurePhase::kValidation);
      }
      if (!agree(result, group, "in the validation")) return result;
    }
    run_profile(*workload, device, deadline, cell, result);
    return result;
  }

 private:
  /// Note [Operator profiles]: `profile_steps` more steps under the profiler, after every
  /// figure of the cell was taken. A failure leaves the cell's figures as they are: the cell
  /// says why it has no operator table (ineffective_reasons) instead of failing.
  static void run_profile(Workload& workload, const torch::Device& device,
                          std::chrono::steady_clock::time_point deadline, const CellSpec& cell,
                          RankResult& result) {
    if (cell.profile_steps <= 0) return;
    const auto measured = result.metrics.find("measured_iterations");
    const auto measured_run =
        measured == result.metrics.end() ? 0 : static_cast<int64_t>(measured->second);
    try {
      const DeadlineWatchdog watchdog(deadline + kCollectiveGrace,
                                      [&workload] { workload.abort_collectives(); });
      ProfiledSteps steps = run_profiled_steps(workload, device, cell.profile_steps, measured_run);
      if (steps.profile.steps == 0) {
        result.ineffective_reasons.emplace_back(
            "profile_steps: the rank ran no measured iteration to profile again");
        return;
      }
      result.metrics["profile_steps"] = static_cast<double>(steps.profile.steps);
      result.metrics["profile_step_s"] = percentile(steps.step_s, 50.0);
      result.profile = std::move(steps.profile);
    } catch (const std::exception& error) {
      const auto* torch_error = dynamic_cast<const c10::Error*>(&error);
      result.ineffective_reasons.push_back(
          std::string("profile_steps: the profiled steps failed, so the cell has no operator "
                      "table: ") +
          (torch_error != nullptr ? torch_error->what_without_backtrace() : error.what()));
    }
  }

  static void run_loop(Workload& workload, const torch::Device& device, MPI_Comm group,
                       std::chrono::steady_clock::time_point deadline, const CellSpec& cell,
                       RankResult& result) {
    const auto power = open_gpu_power(device);                            // Note [GPU energy]
    CellProgressReporter progress(cell.cell_id, result.group_rank == 0);  // Note [Cell progress]
    LoopOptions options;
    options.device = device;
    options.group = group;
    options.deadline = deadline;
    options.power = power.get();
    options.on_iteration = [&progress](const char* stage, int64_t done, int64_t total) {
      progress.report(stage, done, total);
    };
    if (iterations_auto(cell)) {  // Note [Iterations auto]
      options.adaptive = AdaptiveOptions{.ci_width = cell.ci_width,
                                         .max_seconds = cell.max_seconds,
                                         .max_iterations = cell.max_iterations};
    }
    options.warmup_auto = warmup_auto(cell);
    options.max_seconds = cell.max_seconds;
    const LoopResult loop = run_timed_loop(workload, options);
    if (!loop.timed_out) result.stop_reason = to_string(loop.stop_reason);
    result.warmup_reason = loop.warmup_reason;
    if (options.adaptive && loop.group_interval.count > 0) {
      result.metrics["median_ci_rel"] = loop.group_interval.relative_half_width();
    }
    result.metrics.insert(loop.power_metrics.begin(), loop.power_metrics.end());
    result.timings_s = loop.timings_s;
    result.phase_starts_s = loop.phase_starts_s;
    result.bucket_times_s = loop.bucket_times_s;
    result.bucket_bytes = loop.bucket_bytes;
    result.metrics["loop_origin_epoch_s"] = loop.origin_epoch_s;
    result.warmup_iterations = static_cast<int>(loop.warmup_run);
    result.metrics["loop_wall_s"] = loop.loop_wall_s;
    result.metrics["first_iteration_s"] = loop.first_iteration_s;
    result.metrics["measured_iterations"] =
        static_cast<double>(loop.iterations_run - loop.warmup_run);
    if (loop.timed_out) {
      result.status = CellStatus::kTimeout;
      result.failed_phase = FailurePhase::kLoop;
      result.reason = "the cell's timeout_s passed after " + std::to_string(loop.iterations_run) +
                      " iterations (cooperative stop between iterations)";
    }
  }
};

}  // namespace

std::unique_ptr<CellRunner> make_torch_cell_runner() { return std::make_unique<TorchCellRunner>(); }

}  // namespace scalebench
