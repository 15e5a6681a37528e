// Note [Operator profiles]: `profile_steps` through the real TorchCellRunner on a group of two
// ranks (mpiexec -n 2). The profiled steps come after the measured ones and are none of them:
// the same rows and figures as without profile_steps, plus the operator table with the phases
// of the step, on every rank of the group.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "run_cell.h"

namespace scalebench {
namespace {

using testing_real::run_cell;

CellSpec training_cell() { return testing_real::mlp_training_cell(64, 6); }

/// "phase/name" -> calls over the profiled steps.
std::map<std::string, int64_t> calls_of(const OpProfile& profile) {
  std::map<std::string, int64_t> calls;
  for (const auto& op : profile.ops) calls[op.phase + "/" + op.name] += op.count;
  return calls;
}

TEST(ProfileRun, TrainingStepsProfiledAfterTheMeasuredOnes) {
  const RankResult plain = run_cell(training_cell(), MPI_COMM_WORLD);
  CellSpec cell = training_cell();
  cell.profile_steps = 3;
  const RankResult profiled = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(plain.status, CellStatus::kOk) << plain.reason;
  ASSERT_EQ(profiled.status, CellStatus::kOk) << profiled.reason;
  EXPECT_EQ(profiled.iterations(), plain.iterations());
  EXPECT_EQ(profiled.timings_s.size(), plain.timings_s.size());
  EXPECT_EQ(profiled.metrics.at("measured_iterations"), plain.metrics.at("measured_iterations"));
  // Taken before the profiled steps trained further (the same seed and steps as `plain`).
  EXPECT_NEAR(profiled.metrics.at("param_checksum"), plain.metrics.at("param_checksum"),
              1e-6 * std::abs(plain.metrics.at("param_checksum")));
  EXPECT_FALSE(plain.profile.has_value());
  EXPECT_EQ(plain.metrics.count("profile_steps"), 0U);
  ASSERT_TRUE(profiled.profile.has_value())
      << ::testing::PrintToString(profiled.ineffective_reasons);
  EXPECT_EQ(profiled.profile->steps, 3);
  EXPECT_EQ(profiled.metrics.at("profile_steps"), 3);
  EXPECT_GT(profiled.metrics.at("profile_step_s"), 0);
  EXPECT_EQ(profiled.profile->activities, std::vector<std::string>{"cpu"});
  for (const auto& op : profiled.profile->ops) EXPECT_GE(op.total_s, op.self_s) << op.name;
  auto calls = calls_of(*profiled.profile);
  // The mlp's linear layers: addmm forward (the same calls in each step), mm in their
  // gradients; the SGD step's updates in the optimizer phase.
  EXPECT_GT(calls["forward/aten::addmm"], 0);
  EXPECT_EQ(calls["forward/aten::addmm"] % 3, 0);
  EXPECT_GT(calls["backward/aten::mm"], 0);
  int64_t optimizer_calls = 0;
  for (const auto& [key, count] : calls) {
    if (key.starts_with("optimizer/")) optimizer_calls += count;
  }
  EXPECT_GT(optimizer_calls, 0);
}

TEST(ProfileRun, InferenceBatchesOfTheShardProfiled) {
  CellSpec cell;
  cell.experiment = "infer-mlp";
  cell.model.zoo = "mlp";
  cell.mode = Mode::kInfer;
  cell.device = Device::kCpu;
  cell.batch_size = 4;
  cell.samples = 10;  // uneven shards: 5 samples a rank, the last batch short
  cell.warmup_iterations = 1;
  cell.profile_steps = 4;
  const RankResult result = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(result.status, CellStatus::kOk) << result.reason;
  ASSERT_TRUE(result.profile.has_value()) << ::testing::PrintToString(result.ineffective_reasons);
  EXPECT_EQ(result.profile->steps, 4);
  EXPECT_EQ(result.metrics.at("samples"), 5);  // the profiled batches are not counted
  EXPECT_EQ(calls_of(*result.profile)["forward/aten::addmm"] % 4, 0);
  EXPECT_GT(calls_of(*result.profile)["forward/aten::addmm"], 0);
}

}  // namespace
}  // namespace scalebench
