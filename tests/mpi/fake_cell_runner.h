// A CellRunner without models or GPUs, for protocol and fault tests (like loadgen's
// SystemUnderTestBasic). Deterministic synthetic timings; behaviour chosen by words in
// the cell's experiment name:
//   "throw"  the runner throws a CellError in phase "forward" (the worker loop records it)
//   "fail"   returns a failed RankResult (phase "backward") on group rank 0 only
//   "oom"    returns status oom (phase "forward") on every rank
//   "sleep"  sleeps timeout_s + 1 s, then returns ok
//   "hang"   never returns (the rank-0 watchdog must end the job)
//   "fatal"  throws FatalError (the job ends)
//   "chatty" after the agreement, one MPI_Allreduce over the group every 50 ms for half of
//            timeout_s, then ok: a cell that talks across its nodes while it runs (a link
//            cut mid-cell leaves its ranks stuck in a collective; tests/faults/partition.py)
// Every cell that gets past those passes the fault points setup, forward and (training)
// backward (Note [Fault injection]; a CellError there fails this rank only) and then runs
// one MPI_Allreduce over the group: the group's agreement, so a rank that failed alone
// still meets the others, who return failed in phase `group`. Ok cells then sleep
// SCALEBENCH_FAKE_CELL_S seconds (default 0), and return ok timings.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/base/error.h"
#include "protocol/cell_runner.h"
#include "protocol/fault_injection.h"
#include "protocol/mpi_check.h"

namespace scalebench::testing_fake {

/// Synthetic time of (rank, iteration, phase) in seconds: deterministic, small jitter.
inline double fake_time_s(const CellSpec& cell, int group_rank, int iteration, int phase) {
  const double base = 0.001 * static_cast<double>(cell.batch_size) / cell.world_size + 0.002;
  const double jitter = 0.0001 * ((group_rank * 7 + iteration * 3 + phase * 5) % 11);
  return base * (1 + phase) + jitter;
}

class FakeCellRunner : public CellRunner {
 public:
  std::string device_name(const WorkerContext& context) override {
    return "fake-cpu-" + std::to_string(context.local_index);
  }

  RankResult run(const Assignment& assignment, MPI_Comm group,
                 const WorkerContext& context) override {
    const CellSpec& cell = assignment.cell;
    const std::string& name = cell.experiment;
    int group_rank = 0;
    int group_size = 0;
    MPI_CHECK(MPI_Comm_rank(group, &group_rank));
    MPI_CHECK(MPI_Comm_size(group, &group_size));
    if (group_size != cell.world_size) {
      throw FatalError("group size " + std::to_string(group_size) + " != world_size");
    }
    RankResult result;
    result.cell_id = cell.cell_id;
    result.group_rank = group_rank;
    result.world_rank = context.world_rank;
    result.host = context.host;
    result.device = device_name(context);
    if (name.find("throw") != std::string::npos) {
      throw CellError(FailurePhase::kForward, "fake runner: requested exception");
    }
    if (name.find("fatal") != std::string::npos) throw FatalError("fake runner: fatal");
    if (name.find("hang") != std::string::npos) {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (name.find("sleep") != std::string::npos) {
      std::this_thread::sleep_for(std::chrono::duration<double>(cell.timeout_s + 1.0));
    }
    std::optional<RankResult> own_failure;
    try {
      fault_point("setup", context.world_rank);
      fault_point("forward", context.world_rank);
      if (cell.mode == Mode::kTrain) fault_point("backward", context.world_rank);
    } catch (const CellError& error) {
      own_failure = result;
      own_failure->status = dynamic_cast<const OutOfMemoryError*>(&error) != nullptr
                                ? CellStatus::kOom
                                : CellStatus::kFailed;
      own_failure->failed_phase = error.phase();
      own_failure->reason = error.what();
    }
    // The agreement: every rank takes part, also the one that failed alone.
    int local[2] = {group_rank, own_failure ? 1 : 0};
    int agreed[2] = {0, 0};
    MPI_CHECK(MPI_Allreduce(local, agreed, 2, MPI_INT, MPI_SUM, group));
    const int sum = agreed[0];
    if (own_failure) return *own_failure;
    if (agreed[1] > 0) {
      result.status = CellStatus::kFailed;
      result.failed_phase = FailurePhase::kGroup;
      result.reason = "fake runner: another rank of the group failed";
      return result;
    }
    if (name.find("oom") != std::string::npos) {
      result.status = CellStatus::kOom;
      result.failed_phase = FailurePhase::kForward;
      result.reason = "fake runner: out of memory";
      return result;
    }
    if (name.find("fail") != std::string::npos && group_rank == 0) {
      result.status = CellStatus::kFailed;
      result.failed_phase = FailurePhase::kBackward;
      result.reason = "fake runner: requested failure";
      return result;
    }
    if (name.find("chatty") != std::string::npos) chatter(cell, group);
    if (const char* delay = std::getenv("SCALEBENCH_FAKE_CELL_S")) {
      std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(delay)));
    }
    fill_timings(cell, group_rank, result);
    result.metrics["param_checksum"] = static_cast<double>(sum) + 0.5;  // same on all ranks
    result.metrics["peak_rss_bytes"] = 1e6 * (group_rank + 1);
    result.metrics["samples"] = static_cast<double>(cell.batch_size * cell.measured_iterations);
    return result;
  }

 private:
  static void chatter(const CellSpec& cell, MPI_Comm group) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(cell.timeout_s / 2.0);
    int stop = 0;
    while (stop == 0) {
      int late = std::chrono::steady_clock::now() >= until ? 1 : 0;
      MPI_CHECK(MPI_Allreduce(&late, &stop, 1, MPI_INT, MPI_MAX, group));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  static void fill_timings(const CellSpec& cell, int group_rank, RankResult& result) {
    result.phases = cell.mode == Mode::kTrain
                        ? std::vector<std::string>{"data", "forward", "backward", "step"}
                        : std::vector<std::string>{"load", "forward", "batch"};
    result.warmup_iterations = cell.warmup_iterations;
    const int iterations = cell.warmup_iterations + cell.measured_iterations;
    for (int i = 0; i < iterations; ++i) {
      for (int p = 0; p < static_cast<int>(result.phases.size()); ++p) {
        result.timings_s.push_back(fake_time_s(cell, group_rank, i, p));
      }
    }
  }
};

inline std::unique_ptr<CellRunner> make_fake_cell_runner() {
  return std::make_unique<FakeCellRunner>();
}

}  // namespace scalebench::testing_fake
