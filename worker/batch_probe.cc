#include "worker/batch_probe.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/base/error.h"
#include "common/base/logging.h"
#include "common/cell/stats.h"
#include "protocol/cell_progress_reporter.h"
#include "protocol/group_batch_search.h"
#include "protocol/group_probe.h"
#include "protocol/mpi_check.h"
#include "worker/infer_workload.h"
#include "worker/memory_stats.h"
#include "worker/train_workload.h"
#include "worker/workload.h"

namespace scalebench {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_test_budget_rank{-1};
std::atomic<double> g_test_budget_bytes{0};

bool is_out_of_memory(const std::exception& error) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr) return true;
  if (dynamic_cast<const OutOfMemoryError*>(&error) != nullptr) return true;
  return is_oom_text(error.what()) || dynamic_cast<const std::bad_alloc*>(&error) != nullptr;
}

std::unique_ptr<Workload> make_workload(const Assignment& assignment, const torch::Device& device,
                                        MPI_Comm group) {
  return assignment.cell.mode == Mode::kTrain ? make_train_workload(assignment, device, group)
                                              : make_infer_workload(assignment, device, group);
}

/// The probe's assignment: the assignment with its cell's probe_cell.
Assignment probe_assignment(const Assignment& assignment, int64_t batch, int64_t iterations) {
  Assignment probe = assignment;
  probe.cell = probe_cell(assignment.cell, batch, iterations);
  return probe;
}

/// Runs `body` with the memory released and the peaks reset before, and released after;
/// returns its outcome as a LocalProbe (status, failure) with the budgeted peak.
template <typename Body>
LocalProbe measured_attempt(const torch::Device& device, double budget_bytes, Body&& body) {
  LocalProbe local;
  release_cached_memory(device);
  const bool rss_reset = reset_peak_memory(device);
  try {
    body(local);
  } catch (const c10::Error& error) {  // the message without LibTorch's C++ backtrace
    if (is_out_of_memory(error)) {
      local.status = ProbeStatus::kOom;
    } else {
      local.failure = error.what_without_backtrace();
    }
  } catch (const std::exception& error) {
    if (is_out_of_memory(error)) {
      local.status = ProbeStatus::kOom;
    } else {
      local.failure = error.what();
    }
  }
  local.peak_bytes = budgeted_peak_bytes(peak_memory_metrics(device, rss_reset), device);
  release_cached_memory(device);
  if (local.status == ProbeStatus::kOk && local.failure.empty() && budget_bytes > 0 &&
      local.peak_bytes > budget_bytes) {
    local.status = ProbeStatus::kOverBudget;
  }
  return local;
}

/// The summarised phase's median and p99 over the measured rows of `loop`.
void loop_statistics(const LoopResult& loop, const Workload& workload, LocalProbe& local) {
  const auto& phases = workload.phases();
  const std::string metric =
      std::find(phases.begin(), phases.end(), "step") != phases.end() ? "step" : "batch";
  const size_t column = std::find(phases.begin(), phases.end(), metric) - phases.begin();
  std::vector<double> times;
  for (int64_t row = loop.warmup_run; row < loop.iterations_run; ++row) {
    times.push_back(loop.timings_s[static_cast<size_t>(row) * phases.size() + column]);
  }
  const Summary summary = summarize(times);
  local.times_s = times;
  local.median_s = summary.median;
  local.p99_s = summary.p99;
  local.timed_out = loop.timed_out;
}

double test_budget_or(double budget, int world_rank) {
  return g_test_budget_rank.load() == world_rank ? g_test_budget_bytes.load() : budget;
}

/// A probe's timed loop: the workload's own counts (no `iterations: auto`), no power meter.
LoopOptions probe_loop(const torch::Device& device, MPI_Comm group,
                       std::chrono::steady_clock::time_point deadline,
                       std::function<void(const char*, int64_t, int64_t)> on_iteration) {
  LoopOptions options;
  options.device = device;
  options.group = group;
  options.deadline = deadline;
  options.on_iteration = std::move(on_iteration);
  return options;
}

}  // namespace

void set_memory_budget_for_testing(int world_rank, double budget_bytes) {
  g_test_budget_bytes = budget_bytes;
  g_test_budget_rank = world_rank;
}

void search_batch(const Assignment& assignment, const torch::Device& device, MPI_Comm group,
                  int node_workers, Clock::time_point deadline, BatchSearchOutcome& outcome) {
  const CellSpec& cell = assignment.cell;
  int world = 1;
  int world_rank = 0;
  MPI_CHECK(MPI_Comm_size(group, &world));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
  int group_rank = 0;
  MPI_CHECK(MPI_Comm_rank(group, &group_rank));
  const bool train = cell.mode == Mode::kTrain;
  outcome = BatchSearchOutcome{};
  // Note [Cell progress]: a long search reports its probes ("probe b64", measured k of n).
  CellProgressReporter progress(cell.cell_id, group_rank == 0);
  std::string probe_stage;
  const auto report_probe = [&progress, &probe_stage](const char* stage, int64_t done,
                                                      int64_t total) {
    if (std::string_view(stage) == "measured") progress.report(probe_stage.c_str(), done, total);
  };
  outcome.budget_bytes = test_budget_or(
      memory_budget_bytes(cell.memory_limit_mb, device, node_workers, /*for_search=*/true),
      world_rank);

  // Probes `batch` on the group (Note [Group probes]); the loop, its start, refinement and time
  // are the shared search's (protocol/group_batch_search.h).
  const ProbeOneBatch probe_batch = [&](int64_t batch, Clock::time_point probe_deadline) {
    probe_stage = "probe b" + std::to_string(batch);
    // Note [Group probes]: a lone step first, so that an OOM never strands a collective.
    if (train && world > 1) {
      const LocalProbe alone = measured_attempt(device, outcome.budget_bytes, [&](LocalProbe&) {
        auto workload =
            make_workload(probe_assignment(assignment, batch, 0), device, MPI_COMM_SELF);
        run_timed_loop(*workload, probe_loop(device, MPI_COMM_SELF, probe_deadline, {}));
      });
      GroupOutcome lone = reduce_probe(alone, batch, world, group);
      if (lone.failed || lone.probe.status != ProbeStatus::kOk) {
        lone.probe.median_s = 0;
        lone.probe.p99_s = 0;
        lone.probe.throughput = 0;
        lone.probe.times_s.clear();
        if (!lone.failed) {
          SB_LOG(info) << "batch search: " << batch << " " << to_string(lone.probe.status)
                       << " (one step per rank alone)";
        }
        return GroupProbeRun{lone, alone.failure};
      }
    }
    const LocalProbe local = measured_attempt(device, outcome.budget_bytes, [&](LocalProbe& probe) {
      auto workload =
          make_workload(probe_assignment(assignment, batch, cell.probe_iterations), device, group);
      workload->connect();
      const LoopResult loop =
          run_timed_loop(*workload, probe_loop(device, group, probe_deadline, report_probe));
      loop_statistics(loop, *workload, probe);
    });
    return GroupProbeRun{reduce_probe(local, batch, world, group), local.failure};
  };
  outcome.search = search_group_batch(cell, outcome.budget_bytes, probe_batch, deadline, group);
  const GroupSearchResult& search = outcome.search;
  if (search.failed && search.status == CellStatus::kOom) {
    throw OutOfMemoryError(FailurePhase::kBatchSearch, search.reason);
  }
  if (search.failed) throw CellError(FailurePhase::kBatchSearch, search.reason);
  outcome.chosen_batch = search.choice.figures.recommended_batch;
}

}  // namespace scalebench
