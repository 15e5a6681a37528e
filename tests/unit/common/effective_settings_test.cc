// Note [Requested vs effective]: the rules that decide which switches take effect.
#include "common/cell/effective_settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace scalebench {
namespace {

using ::testing::HasSubstr;

std::map<std::string, SettingEffect> by_key(const std::vector<SettingEffect>& effects) {
  std::map<std::string, SettingEffect> out;
  for (const auto& effect : effects) out.emplace(effect.key, effect);
  return out;
}

CellSpec all_on() {
  CellSpec cell;
  cell.tf32 = cell.cudnn_benchmark = cell.deterministic = cell.pinned_memory = true;
  cell.cuda_graphs = true;
  cell.channels_last = true;
  cell.optimizer.fused = true;
  cell.precision = Precision::kBf16;
  return cell;
}

TEST(EffectiveSettings, OnCpuTheGpuSwitchesAreIneffectiveWithTheirReasons) {
  const auto effects = by_key(effective_settings(all_on(), {.sample_rank = 3}));
  for (const char* key : {"tf32", "cudnn_benchmark", "pinned_memory", "cuda_graphs"}) {
    SCOPED_TRACE(key);
    EXPECT_EQ(effects.at(key).requested, SettingValue(true));
    EXPECT_EQ(effects.at(key).effective, SettingValue(false));
    EXPECT_THAT(effects.at(key).reason, HasSubstr("runs on the CPU"));
    EXPECT_THAT(effects.at(key).reason, HasSubstr(std::string(key) + ": "));
  }
  EXPECT_EQ(effects.at("deterministic").effective, SettingValue(true));
  EXPECT_EQ(effects.at("channels_last").effective, SettingValue(true));
  EXPECT_EQ(effects.at("precision").effective, SettingValue(std::string("bf16")));
  EXPECT_EQ(effects.at("optimizer.fused").effective, SettingValue(false));
  EXPECT_THAT(effects.at("optimizer.fused").reason, HasSubstr("not available in this build"));
}

TEST(EffectiveSettings, AmpereTakesEverythingButTheFusedStep) {
  const DeviceFacts h100{.cuda = true, .compute_major = 9, .cudnn = true, .sample_rank = 4};
  for (const auto& effect : effective_settings(all_on(), h100)) {
    SCOPED_TRACE(effect.key);
    if (effect.key == "optimizer.fused") continue;
    EXPECT_EQ(effect.requested, effect.effective);
    EXPECT_EQ(effect.reason, "");
  }
}

TEST(EffectiveSettings, OlderGpuLosesTf32AndBf16) {
  const DeviceFacts v100{.cuda = true, .compute_major = 7, .compute_minor = 0, .cudnn = true};
  const auto effects = by_key(effective_settings(all_on(), v100));
  EXPECT_EQ(effects.at("tf32").effective, SettingValue(false));
  EXPECT_THAT(effects.at("tf32").reason, HasSubstr("this one is 7.0"));
  EXPECT_EQ(effects.at("precision").effective, SettingValue(std::string("fp32")));
  EXPECT_THAT(effects.at("precision").reason, HasSubstr("runs in fp32"));
  EXPECT_EQ(effects.at("channels_last").effective, SettingValue(false)) << "rank unknown";
}

TEST(EffectiveSettings, AnAotiPackageRunsAsCompiledEvenOnAnH100) {
  CellSpec cell = all_on();
  cell.mode = Mode::kInfer;
  cell.model.aoti = "build/net.pt2";
  const DeviceFacts h100{.cuda = true, .compute_major = 9, .cudnn = true, .sample_rank = 3};
  const auto effects = by_key(effective_settings(cell, h100));
  for (const char* key : {"cuda_graphs", "channels_last"}) {
    SCOPED_TRACE(key);
    EXPECT_EQ(effects.at(key).effective, SettingValue(false));
    EXPECT_THAT(effects.at(key).reason, HasSubstr("AOTInductor package"));
  }
  EXPECT_EQ(effects.at("precision").effective, SettingValue(std::string("fp32")));
  EXPECT_THAT(effects.at("precision").reason, HasSubstr("export a bf16 package"));
  EXPECT_EQ(effects.at("tf32").effective, SettingValue(true)) << "a CUDA math mode still applies";
}

TEST(EffectiveSettings, TheAotiTwinOfTheCompileAxisRunsAsCompiledAndTorchScriptAsEager) {
  CellSpec cell = all_on();
  cell.mode = Mode::kInfer;
  cell.model.zoo = "resnet18";
  cell.compile = "aoti";
  const DeviceFacts h100{.cuda = true, .compute_major = 9, .cudnn = true, .sample_rank = 3};
  auto effects = by_key(effective_settings(cell, h100));
  EXPECT_EQ(effects.at("channels_last").effective, SettingValue(false));
  EXPECT_EQ(effects.at("cuda_graphs").effective, SettingValue(false));
  EXPECT_EQ(effects.at("precision").effective, SettingValue(std::string("fp32")));
  cell.compile = "torchscript";  // a traced module runs under autocast, in any layout
  effects = by_key(effective_settings(cell, h100));
  EXPECT_EQ(effects.at("channels_last").effective, SettingValue(true));
  EXPECT_EQ(effects.at("cuda_graphs").effective, SettingValue(true));
  EXPECT_EQ(effects.at("precision").effective, SettingValue(std::string("bf16")));
}

TEST(EffectiveSettings, SwitchesThatAreOffAreAlwaysEffectiveAndInferenceHasNoOptimizer) {
  CellSpec cell;
  cell.mode = Mode::kInfer;
  const auto effects = effective_settings(cell, {});
  for (const auto& effect : effects) {
    EXPECT_EQ(effect.requested, effect.effective) << effect.key;
    EXPECT_EQ(effect.reason, "") << effect.key;
    EXPECT_NE(effect.key, "optimizer.fused");
  }
  const CellSpec applied = with_effective_settings(all_on(), effective_settings(all_on(), {}));
  EXPECT_FALSE(applied.tf32);
  EXPECT_FALSE(applied.pinned_memory);
  EXPECT_FALSE(applied.cuda_graphs);
  EXPECT_TRUE(applied.deterministic);
}

}  // namespace
}  // namespace scalebench
