// Batch size auto (issue 14, Note [Batch search], Note [Group probes]) with the real LibTorch
// runner on CPU under a memory budget: the search finds the boundary that running each size
// directly finds, for world size 1 and the whole group; a budget exceeded on one rank only
// fails the probe for the whole group without a hang; memory_limit_mb records a normal cell
// `oom`; and a run stores the probes and figures.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <thread>

#include "common/base/exit_status.h"
#include "common/cell/batch_refinement.h"
#include "protocol/mpi_comm.h"
#include "results/reader.h"
#include "results/store.h"
#include "run_cell.h"
#include "run_real_cli.h"
#include "tests/unit/common/git_test_fixture.h"
#include "worker/batch_probe.h"
#include "worker/torch_cell_runner.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;

using testing_real::context_for;
using testing_real::run_cell;

/// A training cell whose activations grow by megabytes per sample (ResNet-18 on 3x160x160),
/// so that one sample more or less is far above the noise of the resident-set peak.
CellSpec memory_cell(int64_t batch) {
  CellSpec cell;
  cell.experiment = "auto";
  cell.model.zoo = "resnet18";
  cell.input_shape = {3, 160, 160};
  cell.num_classes = 4;
  cell.mode = Mode::kTrain;
  cell.device = Device::kCpu;
  cell.backend = Backend::kMpi;
  cell.cpu_threads = 1;
  cell.batch_size = batch;
  cell.warmup_iterations = 1;
  cell.measured_iterations = 1;
  cell.probe_iterations = 1;
  cell.seed = 3;
  return cell;
}

/// The budgeted peak (Note [Counting CPU allocations]: the bytes of the tensors) of one
/// direct run at `batch` under a budget too large to matter, the group's largest.
double direct_peak(int64_t batch, MPI_Comm group) {
  CellSpec cell = memory_cell(batch);
  cell.memory_limit_mb = 1 << 20;
  const RankResult r = run_cell(cell, group);
  EXPECT_EQ(r.status, CellStatus::kOk) << r.reason;
  const double mine = r.metrics.at("peak_allocated_bytes");
  double largest = 0;
  MPI_Allreduce(&mine, &largest, 1, MPI_DOUBLE, MPI_MAX, group);
  return largest;
}

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

/// A budget where batch 6.5 would peak if memory grew exactly linearly: not on the peak of a
/// whole batch (a limit at the midpoint of 4 and 8 could sit on the peak of 6).
double budget_between_6_and_7(MPI_Comm group) {
  const double p4 = direct_peak(4, group);
  const double p8 = direct_peak(8, group);
  return p4 + 0.625 * (p8 - p4);
}

/// Auto finds M; running M directly under the same limit fits and M + 1 does not.
void expect_same_boundary_as_direct_runs(MPI_Comm group) {
  const double limit_mb = mib(budget_between_6_and_7(group));
  CellSpec automatic = memory_cell(kBatchAuto);
  automatic.memory_limit_mb = limit_mb;
  automatic.max_batch = 16;
  const RankResult searched = run_cell(automatic, group);
  ASSERT_EQ(searched.status, CellStatus::kOk) << searched.reason;
  int64_t max_ok = 0;
  for (const auto& p : searched.probes) {
    if (p.status == ProbeStatus::kOk) max_ok = std::max(max_ok, p.batch);
  }
  // Between the two sizes the budget was drawn between; the direct runs below pin it exactly.
  EXPECT_GE(max_ok, 4);
  EXPECT_LT(max_ok, 8);
  EXPECT_EQ(searched.metrics.at("memory_budget_bytes"), limit_mb * 1024 * 1024);
  // The loop ran the recommended batch: within the 10 % margin, so at most max_ok.
  const auto chosen = static_cast<int64_t>(searched.metrics.at("batch_size"));
  EXPECT_GE(chosen, 1);
  EXPECT_LE(chosen, max_ok);
  for (const int64_t batch : {max_ok, max_ok + 1}) {  // every size around the boundary
    CellSpec direct = memory_cell(batch);
    direct.memory_limit_mb = limit_mb;
    const RankResult r = run_cell(direct, group);
    SCOPED_TRACE(batch);
    if (batch == max_ok) {
      EXPECT_EQ(r.status, CellStatus::kOk) << r.reason;
    } else {
      // One rank over the limit makes it oom; the others report the group's failure.
      int oom = r.status == CellStatus::kOom ? 1 : 0;
      int any = 0;
      MPI_Allreduce(&oom, &any, 1, MPI_INT, MPI_MAX, group);
      EXPECT_EQ(any, 1);
      if (r.status == CellStatus::kOom) {
        EXPECT_NE(r.reason.find("above memory_limit_mb"), std::string::npos) << r.reason;
        EXPECT_NE(r.reason.find("allocated tensors"), std::string::npos) << r.reason;
        EXPECT_NE(r.reason.find("batch " + std::to_string(batch)), std::string::npos) << r.reason;
      }
    }
  }
}

TEST(BatchAutoMpi, WorldSizeOneFindsTheBoundaryOfDirectRuns) {
  // Every rank alone: the same search in each process.
  expect_same_boundary_as_direct_runs(MPI_COMM_SELF);
}

TEST(BatchAutoMpi, TheGroupFindsTheBoundaryOfDirectRuns) {
  expect_same_boundary_as_direct_runs(MPI_COMM_WORLD);
}

/// Note [Batch refinement]: after the search, the largest batch the memory line puts inside
/// the margin has been measured (by the bisection or by the one extra probe), and the loop
/// ran a batch whose measured peak is inside the margin.
TEST(BatchAutoMpi, TheRecommendedBatchIsRefinedInsideTheMargin) {
  CellSpec automatic = memory_cell(kBatchAuto);
  automatic.input_shape = {3, 64, 64};
  automatic.max_batch = 64;
  CellSpec probe12 = automatic;
  probe12.batch_size = 12;
  probe12.memory_limit_mb = 1 << 20;
  const RankResult at12 = run_cell(probe12, MPI_COMM_WORLD);
  ASSERT_EQ(at12.status, CellStatus::kOk) << at12.reason;
  double peak12 = 0;
  const double mine = at12.metrics.at("peak_allocated_bytes");
  MPI_Allreduce(&mine, &peak12, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  // The margin (10 %) ends near batch 12: no power of two.
  automatic.memory_limit_mb = mib(peak12 / 0.9);
  const RankResult searched = run_cell(automatic, MPI_COMM_WORLD);
  ASSERT_EQ(searched.status, CellStatus::kOk) << searched.reason;
  const double budget = searched.metrics.at("memory_budget_bytes");
  const BatchChoiceSettings settings{.safety_margin = 0.1, .memory_budget_bytes = budget};
  const auto line = margin_line(searched.probes, 0.9 * budget);
  ASSERT_TRUE(line.has_value());
  const BatchFigures figures = batch_figures(searched.probes, settings);
  const auto predicted = std::min<int64_t>(
      static_cast<int64_t>((0.9 * budget - line->intercept_bytes) / line->bytes_per_sample),
      figures.max_batch_ok);
  int64_t largest_within = 0;
  for (const auto& p : searched.probes) {
    if (p.status == ProbeStatus::kOk && p.peak_memory_bytes <= 0.9 * budget) {
      largest_within = std::max(largest_within, p.batch);
    }
  }
  const bool measured =
      std::any_of(searched.probes.begin(), searched.probes.end(),
                  [predicted](const BatchProbe& p) { return p.batch == predicted; });
  EXPECT_TRUE(measured || predicted <= largest_within)
      << "line predicts " << predicted << ", largest probed within the margin " << largest_within;
  EXPECT_GT(largest_within, 8);  // beyond the powers of two below the margin
  if (const auto refined = searched.metrics.find("batch_refined");
      refined != searched.metrics.end()) {
    EXPECT_EQ(static_cast<int64_t>(refined->second), searched.probes.back().batch);
  }
  const auto chosen = static_cast<int64_t>(searched.metrics.at("batch_size"));
  EXPECT_EQ(chosen, figures.recommended_batch);
  for (const auto& p : searched.probes) {
    if (p.batch == chosen) {
      EXPECT_LE(p.peak_memory_bytes, 0.9 * budget);
    }
  }
}

TEST(BatchAutoMpi, ABudgetExceededOnOneRankOnlyFailsTheProbeForAllWithoutAHang) {
  const double limit = budget_between_6_and_7(MPI_COMM_WORLD);
  // Only the last rank has a budget; the others use the default (the node's free memory).
  set_memory_budget_for_testing(world_size() - 1, limit);
  CellSpec automatic = memory_cell(kBatchAuto);
  automatic.max_batch = 16;
  const RankResult r = run_cell(automatic, MPI_COMM_WORLD);
  set_memory_budget_for_testing(-1, 0);
  ASSERT_EQ(r.status, CellStatus::kOk) << r.reason;
  int64_t max_ok = 0;
  for (const auto& p : r.probes) {
    if (p.status == ProbeStatus::kOk) max_ok = std::max(max_ok, p.batch);
  }
  EXPECT_GE(max_ok, 4);  // the last rank's budget bounds every rank
  EXPECT_LT(max_ok, 8);
  // Every rank took the same path: identical probes and chosen batch.
  int64_t count = static_cast<int64_t>(r.probes.size());
  int64_t largest = 0;
  MPI_Allreduce(&count, &largest, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(count, largest);
  const double chosen = r.metrics.at("batch_size");
  double chosen_max = 0;
  MPI_Allreduce(&chosen, &chosen_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(chosen, chosen_max);
}

TEST(BatchAutoMpi, ABatchNormModelStartsWhereItCanTrain) {
  // Note [Batch search start]: ResNet-18 on 3x32x32 ends in 1x1 features, where batch norm
  // cannot train on one sample; min_batch is left at 1, as a user would.
  CellSpec automatic = memory_cell(kBatchAuto);
  automatic.input_shape = {3, 32, 32};
  automatic.max_batch = 8;
  automatic.memory_limit_mb = 1 << 20;
  const RankResult r = run_cell(automatic, MPI_COMM_WORLD);
  ASSERT_EQ(r.status, CellStatus::kOk) << r.reason;
  EXPECT_EQ(r.effective.at("min_batch"), "2");
  EXPECT_EQ(r.metrics.at("batch_search_start"), 2.0);
  ASSERT_EQ(r.ineffective_reasons.size(), 1U);
  EXPECT_NE(r.ineffective_reasons[0].find("batch 1 failed for a reason other than memory"),
            std::string::npos)
      << r.ineffective_reasons[0];
  EXPECT_NE(r.ineffective_reasons[0].find("started at 2"), std::string::npos);
  ASSERT_FALSE(r.probes.empty());
  EXPECT_EQ(r.probes.front().batch, 2);
  EXPECT_GE(r.metrics.at("batch_size"), 2.0);
}

TEST(BatchAutoMpi, NothingFitsIsOomInTheBatchSearchWithTheProbesKept) {
  CellSpec automatic = memory_cell(kBatchAuto);
  automatic.memory_limit_mb = 1;  // below any process's resident set
  const RankResult r = run_cell(automatic, MPI_COMM_WORLD);
  // Every rank fails alike: the probe's outcome was reduced before anyone threw.
  EXPECT_EQ(r.status, CellStatus::kOom) << r.reason;
  EXPECT_EQ(r.failed_phase, FailurePhase::kBatchSearch);
  EXPECT_NE(r.reason.find("not even min_batch 1 fits"), std::string::npos) << r.reason;
  ASSERT_EQ(r.probes.size(), 1U);
  EXPECT_EQ(r.probes.front().status, ProbeStatus::kOverBudget);
}

constexpr const char* kMatrix = R"(name: batch-auto
defaults: {device: cpu, backend: mpi, warmup: 1, iterations: 2, timeout_s: 300, cpu_threads: 1}
experiments:
  - {name: searched, model: mlp, input_shape: [64], num_classes: 4, modes: [train, infer],
     batch_sizes: [auto], max_batch: 64, probe_iterations: 2, latency_slo_ms: 1000}
  - {name: forced-oom, model: mlp, input_shape: [64], num_classes: 4, modes: [train],
     batch_sizes: [8], memory_limit_mb: 1}
  - {name: after, model: mlp, input_shape: [64], num_classes: 4, modes: [train],
     batch_sizes: [8]}
)";

TEST(BatchAutoRun, ProbesAndFiguresAreStoredAndAForcedOomLetsTheSweepGoOn) {
  const testing::TempDir dir;
  setenv("SCALEBENCH_PROGRESS_INTERVAL", "0.000001", 1);  // Note [Cell progress]: every probe
  const auto run = testing_real::run_matrix(dir.path(), kMatrix);
  unsetenv("SCALEBENCH_PROGRESS_INTERVAL");
  EXPECT_EQ(run.status, kExitCellsFailed);  // the forced oom
  if (world_rank() != 0) return;
  // The batch search reports its probes to rank 0's log (stage "probe b<N>").
  std::string logs;
  for (const auto& entry : fs::directory_iterator(run.logs())) {
    std::ifstream in(entry.path());
    logs.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_NE(logs.find(": probe b1 iteration 1 of 2"), std::string::npos);
  const auto cells = read_results_overview(run.results()).at("cells");
  ASSERT_EQ(cells.size(), 4U);
  int searched = 0;
  for (const auto& [id, cell] : cells.items()) {
    SCOPED_TRACE(id);
    const auto& spec = cell.at("spec");
    if (spec.at("experiment") == "forced-oom") {
      EXPECT_EQ(cell.at("status"), "oom");
      EXPECT_EQ(cell.at("failed_phase"), "loop");
      EXPECT_NE(cell.at("reason").get<std::string>().find("memory_limit_mb 1 MiB"),
                std::string::npos);
      EXPECT_TRUE(cell.at("summary").is_object());  // the timings are kept
      continue;
    }
    ASSERT_EQ(cell.at("status"), "ok") << cell.at("reason");
    const auto& summary = cell.at("summary");
    if (spec.at("experiment") == "after") {
      EXPECT_EQ(summary.at("batch_size"), 8);
      EXPECT_FALSE(summary.contains("recommended_batch"));
      continue;
    }
    ++searched;
    EXPECT_EQ(spec.at("batch_size"), 0);
    const auto datasets = cell.at("datasets");
    EXPECT_NE(std::find(datasets.begin(), datasets.end(), "probes"), datasets.end());
    // A tiny MLP fits up to max_batch on this machine: doubling 1..64, no bisection.
    EXPECT_EQ(summary.at("max_batch_ok"), 64);
    EXPECT_EQ(summary.at("oom_batch"), 0);
    EXPECT_EQ(summary.at("batch_size"), summary.at("recommended_batch"));
    for (const char* key : {"best_batch", "knee_batch", "slo_batch", "recommended_batch"}) {
      EXPECT_GE(summary.at(key).get<int64_t>(), 1) << key;
      EXPECT_LE(summary.at(key).get<int64_t>(), 64) << key;
    }
    EXPECT_LE(summary.at("knee_batch").get<int64_t>(), summary.at("best_batch").get<int64_t>());
    EXPECT_GT(summary.at("memory_budget_bytes").get<double>(), 0);
  }
  EXPECT_EQ(searched, 2);
}

}  // namespace
}  // namespace scalebench
