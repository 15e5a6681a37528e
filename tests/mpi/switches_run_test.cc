// `scalebench run` with the real LibTorch worker on CPU, sweeping channels_last and
// cpu_threads with the GPU switches on (issue 12): every cell stores what was requested
// (its spec) and what took effect (effective_<key>), and the GPU switches (cuda_graphs on
// an inference cell too) are recorded as ineffective with their reasons (Note [Requested vs
// effective]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/base/exit_status.h"
#include "orchestrator/cli.h"
#include "protocol/mpi_comm.h"
#include "results/reader.h"
#include "results/store.h"
#include "run_real_cli.h"
#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr const char* kMatrix = R"(name: switches
defaults: {device: cpu, backend: mpi, warmup: 1, iterations: 2, timeout_s: 120,
           tf32: true, cudnn_benchmark: true, pinned_memory: true}
sweep: {modes: [train], batch_sizes: [4], channels_last: [false, true], cpu_threads: [1, 2]}
experiments:
  - {name: conv, model: resnet18, input_shape: [3, 32, 32], num_classes: 4}
  - {name: mlp, model: mlp, input_shape: [16], num_classes: 2}
  - {name: graphs, model: mlp, input_shape: [16], num_classes: 2, modes: [infer],
     cuda_graphs: true, channels_last: [false], cpu_threads: [1], validate: true}
)";

bool has_reason(const nlohmann::json& cell, const std::string& start) {
  for (const auto& reason : cell.at("ineffective_reasons")) {
    if (reason.get<std::string>().starts_with(start)) return true;
  }
  return false;
}

TEST(SwitchesRun, RequestedAndEffectiveAreStoredAndGpuSwitchesAreIneffectiveOnCpu) {
  const testing::TempDir dir;
  const auto run = testing_real::run_matrix(dir.path(), kMatrix);
  EXPECT_EQ(run.status, kExitOk);
  if (world_rank() != 0) return;
  const auto cells = read_results_overview(run.results()).at("cells");
  ASSERT_EQ(cells.size(), 2U * 2U * 2U + 1U);
  for (const auto& [id, cell] : cells.items()) {
    SCOPED_TRACE(id);
    ASSERT_EQ(cell.at("status"), "ok");
    const auto& spec = cell.at("spec");
    if (spec.at("experiment") == "graphs") {  // inference: cuda_graphs asked, eager on CPU
      EXPECT_EQ(spec.at("cuda_graphs"), true);
      EXPECT_EQ(cell.at("effective_cuda_graphs"), "false");
      EXPECT_TRUE(has_reason(cell, "cuda_graphs: ")) << cell.at("ineffective_reasons");
      // Note [Accuracy validation]: eager fp32 against its fp32 reference.
      const auto& accuracy = cell.at("accuracy");
      ASSERT_TRUE(accuracy.is_object());
      EXPECT_EQ(accuracy.at("verdict"), "passed");
      EXPECT_EQ(accuracy.at("kind"), "inference");
      EXPECT_EQ(accuracy.at("failed_checks"), nlohmann::json::array());
      EXPECT_EQ(accuracy.at("validation_samples"), 64);
      continue;
    }
    EXPECT_EQ(spec.at("tf32"), true) << "the spec holds what was requested";
    EXPECT_EQ(cell.at("effective_tf32"), "false");
    EXPECT_EQ(cell.at("effective_cudnn_benchmark"), "false");
    EXPECT_EQ(cell.at("effective_pinned_memory"), "false");
    for (const char* key : {"tf32: ", "cudnn_benchmark: ", "pinned_memory: "}) {
      EXPECT_TRUE(has_reason(cell, key)) << key << cell.at("ineffective_reasons");
    }
    EXPECT_EQ(cell.at("effective_cpu_threads"), std::to_string(spec.at("cpu_threads").get<int>()));
    const bool conv = spec.at("experiment") == "conv";
    const bool channels_last = spec.value("channels_last", false);
    EXPECT_EQ(cell.at("effective_channels_last"), channels_last && conv ? "true" : "false");
    EXPECT_EQ(has_reason(cell, "channels_last: "), channels_last && !conv);
    EXPECT_EQ(cell.at("effective_precision"), "fp32");
    EXPECT_EQ(cell.at("effective_optimizer.fused"), "false");
    EXPECT_FALSE(has_reason(cell, "optimizer.fused")) << "not requested: nothing to explain";
    EXPECT_TRUE(cell.at("accuracy").is_null()) << "not validated";
  }
}

}  // namespace
}  // namespace scalebench
