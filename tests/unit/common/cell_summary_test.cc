// summarize_cell on hand-built RankResults with known answers.
#include "results/cell_summary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace scalebench {
namespace {

/// A rank whose table has `phases` columns and one row per entry of `rows`.
RankResult make_rank(int group_rank, const std::vector<std::string>& phases, int warmup,
                     const std::vector<std::vector<double>>& rows,
                     std::map<std::string, double> metrics = {}) {
  RankResult r;
  r.group_rank = group_rank;
  r.world_rank = group_rank + 1;
  r.phases = phases;
  r.warmup_iterations = warmup;
  for (const auto& row : rows) r.timings_s.insert(r.timings_s.end(), row.begin(), row.end());
  r.metrics = std::move(metrics);
  return r;
}

CellSpec train_cell(int world_size, int64_t batch) {
  CellSpec cell;
  cell.mode = Mode::kTrain;
  cell.world_size = world_size;
  cell.batch_size = batch;
  cell.warmup_iterations = 1;
  cell.measured_iterations = 5;
  return cell;
}

const std::vector<std::string> kTrainPhases = {"forward", "step"};

TEST(CellSummary, TrainUsesSlowestRankPerIterationAndSkipsWarmup) {
  // Warm-up row (10 s) must be ignored. Per measured iteration, max over ranks of step:
  //   it1: max(1.0, 1.1) = 1.1; it2: max(1.2, 1.0) = 1.2; it3: 1.0; it4: 1.05; it5: 1.1
  const auto r0 =
      make_rank(0, kTrainPhases, 1,
                {{9.0, 10.0}, {0.4, 1.0}, {0.6, 1.2}, {0.4, 1.0}, {0.5, 1.05}, {0.4, 1.1}},
                {{"param_checksum", 123.456}, {"peak_allocated_bytes", 100.0}});
  const auto r1 = make_rank(
      1, kTrainPhases, 1, {{9.0, 10.0}, {0.6, 1.1}, {0.4, 1.0}, {0.2, 0.9}, {0.5, 1.0}, {0.4, 1.1}},
      {{"param_checksum", 123.456}, {"peak_allocated_bytes", 300.0}});
  const CellSummary s = summarize_cell(train_cell(2, 8), {r0, r1});
  EXPECT_EQ("step", s.metric);
  EXPECT_EQ(5u, s.time.count);
  EXPECT_NEAR(1.1, s.time.median, 1e-12);  // sorted: 1.0 1.05 1.1 1.1 1.2
  EXPECT_NEAR(1.09, s.time.mean, 1e-12);
  EXPECT_NEAR(1.0, s.time.min, 1e-12);
  EXPECT_NEAR(1.2, s.time.max, 1e-12);
  EXPECT_NEAR(8.0 * 2 / 1.1, s.throughput_samples_per_s, 1e-9);
  EXPECT_NEAR(8.0 / 1.1, s.samples_per_s_per_worker, 1e-9);
  // forward rank-means per iteration: 0.5 0.5 0.3 0.5 0.4 -> median 0.5
  EXPECT_NEAR(0.5, s.phase_median_s.at("forward"), 1e-12);
  EXPECT_NEAR(1.05, s.phase_median_s.at("step"), 1e-12);  // means 1.05 1.1 .95 1.025 1.1
  EXPECT_EQ(300.0, s.peak_memory_bytes);
  EXPECT_TRUE(s.valid_enough_iterations);
  EXPECT_TRUE(s.valid_cv);  // std 0.0742 / 1.09 = 0.068
  EXPECT_TRUE(s.valid_replicas_in_sync);
  EXPECT_TRUE(s.valid);
}

TEST(CellSummary, ReplicasOutOfSyncInvalidates) {
  const std::vector<std::vector<double>> rows = {{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}};
  struct Case {
    double checksum1;
    bool in_sync;
  };
  for (const Case c : {Case{1000.0, true}, Case{1000.0000005, true}, Case{1000.01, false}}) {
    SCOPED_TRACE(c.checksum1);
    const auto r0 = make_rank(0, kTrainPhases, 0, rows, {{"param_checksum", 1000.0}});
    const auto r1 = make_rank(1, kTrainPhases, 0, rows, {{"param_checksum", c.checksum1}});
    const CellSummary s = summarize_cell(train_cell(2, 4), {r0, r1});
    EXPECT_EQ(c.in_sync, s.valid_replicas_in_sync);
    EXPECT_EQ(c.in_sync, s.valid);
  }
  // A rank without a checksum cannot be shown in sync.
  const auto r0 = make_rank(0, kTrainPhases, 0, rows, {{"param_checksum", 1.0}});
  const auto r1 = make_rank(1, kTrainPhases, 0, rows);
  EXPECT_FALSE(summarize_cell(train_cell(2, 4), {r0, r1}).valid_replicas_in_sync);
  // A replay cell has no parameters (Note [Replay workload]): nothing to hold in sync.
  CellSpec replay = train_cell(2, 4);
  replay.model = ModelSpec{};
  replay.model.replay = "resnet50.json";
  const auto bare = make_rank(0, kTrainPhases, 0, rows);
  EXPECT_TRUE(summarize_cell(replay, {bare, r1}).valid_replicas_in_sync);
}

TEST(CellSummary, AnUntrustedRankInvalidates) {
  // A program cell whose worker found a reason not to trust it (here: fewer steps than
  // asked) is not valid, whatever its timings: info shows valid 0.
  const std::vector<std::vector<double>> rows = {{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}};
  auto r0 = make_rank(0, kTrainPhases, 1, rows, {{"param_checksum", 1.0}});
  auto r1 = make_rank(1, kTrainPhases, 1, rows, {{"param_checksum", 1.0}});
  EXPECT_TRUE(summarize_cell(train_cell(2, 8), {r0, r1}).valid);
  r1.untrusted_reasons.push_back("the program ran 8 steps where 20 were asked");
  const CellSummary s = summarize_cell(train_cell(2, 8), {r0, r1});
  EXPECT_TRUE(s.valid_enough_iterations && s.valid_cv && s.valid_replicas_in_sync);
  EXPECT_FALSE(s.valid);
}

TEST(CellSummary, FinalLossMeanIsTheGroupsLoss) {
  const std::vector<std::vector<double>> rows = {{0, 1}};
  const auto r0 = make_rank(0, kTrainPhases, 0, rows, {{"final_loss", 2.0}});
  const auto r1 = make_rank(1, kTrainPhases, 0, rows, {{"final_loss", 3.0}});
  EXPECT_DOUBLE_EQ(summarize_cell(train_cell(2, 4), {r0, r1}).final_loss_mean, 2.5);
  EXPECT_TRUE(std::isnan(
      summarize_cell(train_cell(2, 4), {r0, make_rank(1, kTrainPhases, 0, rows)}).final_loss_mean))
      << "a rank without a loss";
}

// Note [CPU oversubscription]: the most loaded node's busy threads per core.
TEST(CellSummary, CpuThreadsPerCoreIsTheWorstRanks) {
  const std::vector<std::vector<double>> rows = {{0, 1}};
  const std::map<std::string, double> fits = {
      {"node_cores", 8}, {"node_workers", 2}, {"cpu_threads", 3}, {"mpi_comm_threads", 1}};
  std::map<std::string, double> crowded = fits;
  crowded["cpu_threads"] = 5;  // 2 x (5 + 1) / 8 = 1.5
  const auto r0 = make_rank(0, kTrainPhases, 0, rows, fits);
  const auto r1 = make_rank(1, kTrainPhases, 0, rows, crowded);
  EXPECT_DOUBLE_EQ(summarize_cell(train_cell(2, 4), {r0, r0}).cpu_threads_per_core, 1.0);
  EXPECT_DOUBLE_EQ(summarize_cell(train_cell(2, 4), {r0, r1}).cpu_threads_per_core, 1.5);
  EXPECT_TRUE(std::isnan(summarize_cell(train_cell(2, 4), {r0, make_rank(1, kTrainPhases, 0, rows)})
                             .cpu_threads_per_core));
}

TEST(CellSummary, TooFewIterationsAndHighCvAreFlagged) {
  const auto few =
      make_rank(0, kTrainPhases, 0, {{0, 1}, {0, 1}, {0, 1}, {0, 1}}, {{"param_checksum", 1.0}});
  const CellSummary s_few = summarize_cell(train_cell(1, 1), {few});
  EXPECT_EQ(4u, s_few.time.count);
  EXPECT_FALSE(s_few.valid_enough_iterations);
  EXPECT_TRUE(s_few.valid_cv);  // cv 0
  EXPECT_FALSE(s_few.valid);

  const auto noisy = make_rank(0, kTrainPhases, 0, {{0, 1}, {0, 2}, {0, 1}, {0, 2}, {0, 1}},
                               {{"param_checksum", 1.0}});
  const CellSummary s_noisy = summarize_cell(train_cell(1, 1), {noisy});
  EXPECT_TRUE(s_noisy.valid_enough_iterations);
  EXPECT_FALSE(s_noisy.valid_cv);
  EXPECT_FALSE(s_noisy.valid);
}

TEST(CellSummary, InferenceThroughputIsSamplesOverSlowestRankSum) {
  CellSpec cell;
  cell.mode = Mode::kInfer;
  cell.world_size = 2;
  cell.batch_size = 10;
  cell.samples = 70;
  const std::vector<std::string> phases = {"forward", "batch"};
  // rank 0: warm-up 5.0, then 4 batches: 0.1 0.2 0.1 0.2 (sum 0.6)
  // rank 1: warm-up 5.0, then 3 batches: 0.3 0.3 0.3      (sum 0.9, slowest)
  const auto r0 =
      make_rank(0, phases, 1, {{4, 5.0}, {0.05, 0.1}, {0.1, 0.2}, {0.05, 0.1}, {0.1, 0.2}},
                {{"peak_rss_bytes", 50.0}});
  const auto r1 = make_rank(1, phases, 1, {{4, 5.0}, {0.2, 0.3}, {0.2, 0.3}, {0.2, 0.3}},
                            {{"peak_rss_bytes", 70.0}});
  const CellSummary s = summarize_cell(cell, {r0, r1});
  EXPECT_EQ("batch", s.metric);
  EXPECT_EQ(7u, s.time.count);  // every measured batch of every rank
  EXPECT_NEAR(0.2, s.time.median, 1e-12);
  EXPECT_NEAR(0.3, s.time.max, 1e-12);
  EXPECT_NEAR(70.0 / 0.9, s.throughput_samples_per_s, 1e-9);
  EXPECT_NEAR(35.0 / 0.9, s.samples_per_s_per_worker, 1e-9);
  EXPECT_EQ(70.0, s.peak_memory_bytes);   // no GPU metric: peak RSS
  EXPECT_TRUE(s.valid_replicas_in_sync);  // not applicable to inference

  // Every rank reporting its `samples` overrides the spec's dataset size.
  auto r0s = r0;
  auto r1s = r1;
  r0s.metrics["samples"] = 40;
  r1s.metrics["samples"] = 30;
  cell.samples = 0;
  EXPECT_NEAR(70.0 / 0.9, summarize_cell(cell, {r0s, r1s}).throughput_samples_per_s, 1e-9);
}

TEST(CellSummary, CarriesTheThresholdsItJudgedBy) {
  const auto rank = make_rank(0, kTrainPhases, 0, {{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}},
                              {{"param_checksum", 1.0}});
  const CellSummary s = summarize_cell(train_cell(1, 1), {rank});
  EXPECT_EQ(kMinValidIterations, s.thresholds.min_iterations);
  EXPECT_EQ(kMaxValidCv, s.thresholds.max_cv);
  EXPECT_EQ(kReplicaChecksumRelTolerance, s.thresholds.replica_checksum_rel_tolerance);
  // The boundary cases of the flags are inclusive: count == minimum is enough.
  EXPECT_EQ(s.thresholds.min_iterations, s.time.count);
  EXPECT_TRUE(s.valid_enough_iterations);
}

TEST(CellSummary, NoTimingsGivesNaNAndInvalid) {
  RankResult failed;
  failed.status = CellStatus::kFailed;
  const CellSummary s = summarize_cell(train_cell(1, 4), {failed});
  EXPECT_EQ(0u, s.time.count);
  EXPECT_TRUE(std::isnan(s.time.median));
  EXPECT_TRUE(std::isnan(s.throughput_samples_per_s));
  EXPECT_TRUE(std::isnan(s.peak_memory_bytes));
  EXPECT_FALSE(s.valid);
}

// Note [GPU energy]: energy sums the ranks' loops; samples per joule divides the measured
// global batches by it; a rank without a reading (CPU, no NVML) makes both NaN.
TEST(CellSummary, EnergyPerCellSumsTheRanksAndDividesTheLoopsSamples) {
  const std::vector<std::vector<double>> rows = {{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}};
  const auto r0 =
      make_rank(0, kTrainPhases, 1, rows,
                {{"param_checksum", 1.0}, {"gpu_energy_j", 10.0}, {"measured_iterations", 5}});
  const auto r1 =
      make_rank(1, kTrainPhases, 1, rows,
                {{"param_checksum", 1.0}, {"gpu_energy_j", 20.0}, {"measured_iterations", 5}});
  const CellSummary s = summarize_cell(train_cell(2, 4), {r0, r1});
  EXPECT_DOUBLE_EQ(30.0, s.energy_j);
  EXPECT_DOUBLE_EQ(4.0 * 2 * 5 / 30.0, s.samples_per_joule);  // 40 samples, 30 J
  auto cpu = r1;
  cpu.metrics.erase("gpu_energy_j");
  const CellSummary without = summarize_cell(train_cell(2, 4), {r0, cpu});
  EXPECT_TRUE(std::isnan(without.energy_j));
  EXPECT_TRUE(std::isnan(without.samples_per_joule));
}

// Note [Batch search]: an auto cell's summary runs at the ranks' chosen batch and carries the
// figures of the probes; a fixed batch carries none.
TEST(CellSummary, AutoBatchUsesTheChosenBatchAndTheProbesFigures) {
  const std::vector<std::vector<double>> rows = {{0, 1}, {0, 2}, {0, 2}, {0, 2}, {0, 2}, {0, 2}};
  CellSpec cell = train_cell(1, kBatchAuto);
  cell.safety_margin = 0.5;
  auto r0 = make_rank(0, kTrainPhases, 1, rows,
                      {{"param_checksum", 1.0}, {"batch_size", 8}, {"memory_budget_bytes", 1000}});
  BatchProbe fits;
  fits.batch = 8;
  fits.median_s = 2;
  fits.throughput = 4;
  fits.peak_memory_bytes = 400;
  BatchProbe over = fits;
  over.batch = 16;
  over.status = ProbeStatus::kOverBudget;
  over.throughput = 0;
  over.peak_memory_bytes = 1200;
  r0.probes = {fits, over};
  const CellSummary s = summarize_cell(cell, {r0});
  EXPECT_EQ(8, s.batch_size);
  EXPECT_DOUBLE_EQ(8.0 / 2.0, s.throughput_samples_per_s);
  ASSERT_TRUE(s.batch_figures.has_value());
  EXPECT_EQ(8, s.batch_figures->max_batch_ok);
  EXPECT_EQ(16, s.batch_figures->oom_batch);
  EXPECT_EQ(8, s.batch_figures->recommended_batch);  // 400 <= 0.5 x 1000
  EXPECT_DOUBLE_EQ(1000, s.memory_budget_bytes);
  EXPECT_FALSE(summarize_cell(train_cell(1, 8), {r0}).batch_figures.has_value());
}

}  // namespace
}  // namespace scalebench
