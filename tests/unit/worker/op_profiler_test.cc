// run_profiled_steps (Note [Operator profiles]) on LibTorch's real profiler: a small model's
// forward and backward in their phases, the iterations it repeats, and the step times.
#include "worker/op_profiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace scalebench {
namespace {

/// One training step of a linear layer in three phases: forward, backward, step.
class LinearWorkload : public Workload {
 public:
  LinearWorkload() : layer_(torch::nn::Linear(64, 32)) {}
  const std::vector<std::string>& phases() const override { return names_; }
  int64_t warmup_iterations() const override { return 2; }
  int64_t measured_iterations() const override { return 3; }
  bool lockstep() const override { return false; }
  void run_iteration(int64_t iteration, PhaseTimer& timer) override {
    seen_.push_back(iteration);
    PhaseScope step(timer, 2);
    torch::Tensor loss;
    {
      PhaseScope forward(timer, 0);
      loss = layer_->forward(torch::ones({16, 64})).sum();
    }
    {
      PhaseScope backward(timer, 1);
      loss.backward();
    }
    layer_->zero_grad();
    torch::zeros({8}).add_(1);  // in the step phase, outside the others
  }
  void add_metrics(std::map<std::string, double>& /*metrics*/) override {}
  std::vector<int64_t> seen_;

 private:
  torch::nn::Linear layer_;
  std::vector<std::string> names_ = {"forward", "backward", "step"};
};

TEST(OpProfiler, EachOperatorInItsPhase) {
  LinearWorkload workload;
  const ProfiledSteps done = run_profiled_steps(workload, torch::kCPU, 4, 3);
  EXPECT_EQ(done.profile.steps, 4);
  EXPECT_EQ(done.profile.activities, std::vector<std::string>{"cpu"});
  // Measured iterations 2, 3, 4 (warm-up 2), then 2 again.
  EXPECT_EQ(workload.seen_, (std::vector<int64_t>{2, 3, 4, 2}));
  ASSERT_EQ(done.step_s.size(), 4U);
  for (const double step : done.step_s) EXPECT_GT(step, 0.0);
  std::map<std::string, const OpRow*> rows;  // "phase/name"
  for (const auto& op : done.profile.ops) {
    rows[op.phase + "/" + op.name] = &op;
    EXPECT_EQ(op.device, "cpu");
    EXPECT_GE(op.total_s, op.self_s) << op.name;
    EXPECT_GE(op.self_s, 0.0) << op.name;
    EXPECT_NE(op.name.rfind("scalebench.phase/", 0), 0U) << "a phase scope is no operator";
  }
  std::vector<std::string> keys;
  for (const auto& [key, row] : rows) keys.push_back(key);
  ASSERT_TRUE(rows.contains("forward/aten::addmm")) << ::testing::PrintToString(keys);
  EXPECT_EQ(rows["forward/aten::addmm"]->count, 4);
  EXPECT_GT(rows["forward/aten::addmm"]->self_cpu_memory_bytes, 0);  // its 16 x 32 output
  EXPECT_TRUE(rows.contains("backward/aten::mm")) << ::testing::PrintToString(keys);
  EXPECT_TRUE(rows.contains("step/aten::add_")) << ::testing::PrintToString(keys);
  // Nesting found: some operator's self time is below its total (e.g. autograd's
  // evaluate_function around each backward node).
  EXPECT_TRUE(std::any_of(done.profile.ops.begin(), done.profile.ops.end(),
                          [](const OpRow& op) { return op.self_s < op.total_s; }));
  // Rows in order of self time.
  for (size_t i = 1; i < done.profile.ops.size(); ++i) {
    EXPECT_GE(done.profile.ops[i - 1].self_s, done.profile.ops[i].self_s);
  }
}

TEST(OpProfiler, NothingWithoutStepsOrMeasuredIterations) {
  LinearWorkload workload;
  EXPECT_EQ(run_profiled_steps(workload, torch::kCPU, 0, 3).profile.steps, 0);
  EXPECT_EQ(run_profiled_steps(workload, torch::kCPU, 3, 0).profile.steps, 0);
  EXPECT_TRUE(workload.seen_.empty());
}

}  // namespace
}  // namespace scalebench
