// The timing harness with a fake workload (no MPI group), and the workloads' helpers.
#include "worker/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "common/base/error.h"
#include "worker/checkpoint.h"
#include "worker/infer_workload.h"
#include "worker/train_workload.h"

namespace scalebench {
namespace {

/// Sleeps `work` in phase 0, some glue outside the phases, then ends the step.
class SleepWorkload : public Workload {
 public:
  SleepWorkload(int64_t warmup, int64_t measured) : warmup_(warmup), measured_(measured) {}
  const std::vector<std::string>& phases() const override { return names_; }
  int64_t warmup_iterations() const override { return warmup_; }
  int64_t measured_iterations() const override { return measured_; }
  bool lockstep() const override { return false; }
  void run_iteration(int64_t iteration, PhaseTimer& timer) override {
    seen_.push_back(iteration);
    PhaseScope step(timer, 1);
    {
      PhaseScope work(timer, 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(8));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  void add_metrics(std::map<std::string, double>& metrics) override { metrics["x"] = 1; }
  std::vector<int64_t> seen_;

 private:
  std::vector<std::string> names_ = {"work", "step"};
  int64_t warmup_, measured_;
};

TEST(TimedLoop, RunsWarmupThenMeasuredAndTimesThemFromOutside) {
  SleepWorkload workload(2, 5);
  const LoopResult result = run_timed_loop(workload, {});
  EXPECT_EQ(workload.seen_, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(result.iterations_run, 7);
  EXPECT_EQ(result.warmup_run, 2);
  EXPECT_FALSE(result.timed_out);
  ASSERT_EQ(result.timings_s.size(), 14u);
  double measured_steps = 0.0;
  for (size_t row = 2; row < 7; ++row) {
    const double work = result.timings_s[row * 2], step = result.timings_s[row * 2 + 1];
    EXPECT_GE(work, 0.008);
    EXPECT_GE(step - work, 0.002) << "glue outside the phases shows as step - sum(phases)";
    measured_steps += step;
  }
  // The loop's own clock around the measured iterations matches the steps it timed: the steps
  // lie inside it one after another, and the loop loses no time between them or at its
  // edges. Guards against a loop whose clock and steps disagree (a step not timed, time of
  // the loop's own work outside every step). Exact where it can be (the sum, the order);
  // the gaps between steps are taken as their median: a busy machine may preempt the loop
  // between two steps (issue 43: |wall - sum| within 2 % failed so), but not between most.
  ASSERT_EQ(result.phase_starts_s.size(), result.timings_s.size());
  const auto step_begin = [&](size_t row) { return result.phase_starts_s[row * 2 + 1]; };
  const auto step_end = [&](size_t row) { return step_begin(row) + result.timings_s[row * 2 + 1]; };
  std::vector<double> gaps, steps;
  for (size_t row = 2; row < 7; ++row) {
    steps.push_back(result.timings_s[row * 2 + 1]);
    if (row == 2) continue;
    gaps.push_back(step_begin(row) - step_end(row - 1));
    EXPECT_GE(gaps.back(), -1e-9) << row;
  }
  std::sort(gaps.begin(), gaps.end());
  std::sort(steps.begin(), steps.end());
  EXPECT_LE(measured_steps, result.loop_wall_s + 1e-9);
  EXPECT_LT((gaps[1] + gaps[2]) / 2, 0.02 * steps[2]) << "time lost between steps";
  const double span = step_end(6) - step_begin(2);
  EXPECT_LT(result.loop_wall_s - span, 0.02 * result.loop_wall_s) << "time at the loop's edges";
  EXPECT_GE(result.first_iteration_s, 0.010);
}

TEST(TimedLoop, StopsCooperativelyAtTheDeadline) {
  SleepWorkload workload(1, 100);
  LoopOptions options;
  options.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  const LoopResult result = run_timed_loop(workload, options);
  EXPECT_TRUE(result.timed_out);
  EXPECT_LT(result.iterations_run, 20);
  EXPECT_EQ(result.timings_s.size(), static_cast<size_t>(result.iterations_run) * 2);
}

TEST(WorkloadHelpers, ParameterChecksumSeesSignsAndPositions) {
  torch::manual_seed(0);
  torch::nn::Linear a(4, 3);
  const double base = parameter_checksum(*a);
  EXPECT_EQ(parameter_checksum(*a), base);
  {
    torch::NoGradGuard no_grad;
    a->weight.neg_();
  }
  const double flipped = parameter_checksum(*a);
  EXPECT_NE(flipped, base);
  {
    torch::NoGradGuard no_grad;
    a->weight.neg_();
    a->weight.copy_(a->weight.flip(1));
  }
  EXPECT_NE(parameter_checksum(*a), base);
}

TEST(WorkloadHelpers, ChannelsLastLayouts) {
  EXPECT_TRUE(to_channels_last(torch::zeros({2, 3, 4, 5}))
                  .is_contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(to_channels_last(torch::zeros({2, 3, 4, 5, 6}))
                  .is_contiguous(torch::MemoryFormat::ChannelsLast3d));
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 8, 3));
  module_to_channels_last(*conv);
  EXPECT_TRUE(conv->weight.is_contiguous(torch::MemoryFormat::ChannelsLast));
}

TEST(WorkloadHelpers, AutocastOnCpuUsesBf16AndRestores) {
  const auto x = torch::randn({4, 4});
  {
    AutocastScope scope(Precision::kBf16, torch::kCPU);
    EXPECT_EQ(torch::matmul(x, x).scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(torch::matmul(x, x).scalar_type(), torch::kFloat);
  EXPECT_THROW(check_precision(Precision::kFp16, torch::kCPU), CellError);
  EXPECT_NO_THROW(check_precision(Precision::kBf16, torch::kCPU));
}

TEST(WorkloadHelpers, BackendsAndOptimizers) {
  EXPECT_EQ(resolve_backend(Backend::kAuto, torch::kCPU), Backend::kMpi);
  EXPECT_EQ(resolve_backend(Backend::kAuto, torch::Device(torch::kCUDA, 0)), Backend::kNccl);
  EXPECT_THROW(resolve_backend(Backend::kNccl, torch::kCPU), CellError);
  torch::nn::Linear model(2, 2);
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    EXPECT_NE(make_optimizer({name, 0.1, 0.9, 0.0}, model->parameters()), nullptr);
  }
  EXPECT_THROW(make_optimizer({"lamb", 0.1, 0.0, 0.0}, model->parameters()), InputError);
}

TEST(WorkloadHelpers, ResolvesModelDefaultsAndRejectsTorchScript) {
  CellSpec cell;
  cell.model.zoo = "resnet18";
  const ResolvedModel resolved = resolve_model(cell);
  EXPECT_EQ(resolved.input_shape, (std::vector<int64_t>{3, 224, 224}));
  EXPECT_EQ(resolved.num_classes, 1000);
  cell.input_shape = {3, 8, 8};
  EXPECT_THROW(resolve_model(cell), InputError);
  cell.model = ModelSpec();
  cell.model.torchscript = "model.pt";
  EXPECT_THROW(resolve_model(cell), CellError);
  cell.batch_size = 4;
  cell.world_size = 3;
  cell.measured_iterations = 5;
  EXPECT_EQ(inference_samples(cell), 60);
  cell.samples = 7;
  EXPECT_EQ(inference_samples(cell), 7);
}

TEST(Checkpoint, LoadsAStateDictAndNamesMismatches) {
  torch::manual_seed(1);
  torch::nn::Sequential source(torch::nn::Linear(3, 2), torch::nn::BatchNorm1d(2));
  c10::Dict<std::string, torch::Tensor> state;
  for (const auto& item : source->named_parameters()) state.insert(item.key(), item.value());
  for (const auto& item : source->named_buffers()) state.insert(item.key(), item.value());
  const auto path = std::filesystem::temp_directory_path() / "scalebench_checkpoint_test.pt";
  const auto bytes = torch::pickle_save(state);
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));

  torch::manual_seed(2);
  torch::nn::Sequential target(torch::nn::Linear(3, 2), torch::nn::BatchNorm1d(2));
  load_state_dict(models::named_state(*target), path.string());
  EXPECT_TRUE(
      torch::equal(target->named_parameters()["0.weight"], source->named_parameters()["0.weight"]));

  torch::nn::Sequential wrong(torch::nn::Linear(4, 2), torch::nn::BatchNorm1d(2));
  try {
    load_state_dict(models::named_state(*wrong), path.string());
    FAIL() << "expected a shape mismatch";
  } catch (const CellError& error) {
    EXPECT_EQ(to_string(error.phase()), "checkpoint_load");
    EXPECT_NE(std::string(error.what()).find("0.weight"), std::string::npos) << error.what();
  }
  EXPECT_THROW(load_state_dict(models::named_state(*target), "/nonexistent.pt"), CellError);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace scalebench
