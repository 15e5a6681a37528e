// MFU in C++ (results/model_flops.h): the analysis's peak table compiled in, looked up
// by the longest device key, and one cell's figures against a hand computation.
#include "results/model_flops.h"

#include <gtest/gtest.h>

namespace scalebench {
namespace {

TEST(ModelFlops, TheShippedTableGivesThePeakOfTheLongestMatchingDevice) {
  EXPECT_EQ(peak_flops("NVIDIA H100 80GB HBM3", "bf16"), 989.4e12);
  EXPECT_EQ(peak_flops("NVIDIA H100 PCIe", "bf16"), 756.5e12);
  EXPECT_EQ(peak_flops("NVIDIA H200", "tf32"), 494.7e12);
  EXPECT_EQ(peak_flops("NVIDIA A100-SXM4-80GB", "fp32"), 19.5e12);
  EXPECT_EQ(peak_flops("nvidia geforce rtx 4090", "fp16"), 165.2e12) << "case-insensitive";
  EXPECT_FALSE(peak_flops("NVIDIA B200", "bf16")) << "never guessed";
  EXPECT_FALSE(peak_flops("cpu", "fp32"));
  EXPECT_FALSE(peak_flops("NVIDIA H200", "int8"));
}

TEST(ModelFlops, PrecisionUsedIsTheEffectiveOne) {
  const nlohmann::json fp32 = {{"precision", "fp32"}};
  EXPECT_EQ(precision_used(fp32, {{"precision", "bf16"}, {"tf32", ""}}), "bf16");
  EXPECT_EQ(precision_used(fp32, {{"precision", "fp32"}, {"tf32", "true"}}), "tf32");
  EXPECT_EQ(precision_used(fp32, {{"precision", ""}, {"tf32", "false"}}), "fp32");
  EXPECT_EQ(precision_used({{"precision", "fp16"}}, nlohmann::json::object()), "fp16");
}

nlohmann::json cell(const std::string& mode, const std::string& device, double flops) {
  return {{"spec", {{"mode", mode}, {"world_size", 2}, {"precision", "bf16"}}},
          {"effective_precision", "bf16"},
          {"effective_tf32", "false"},
          {"device_name", device},
          {"model_flops", {{"flops_per_sample", flops}, {"train_flops_per_sample", 3 * flops}}},
          {"summary", {{"throughput_samples_per_s", 1000.0}}}};
}

TEST(ModelFlops, MfuIsAchievedOverThePeakOfTheWorld) {
  const auto train = cell_flops(cell("train", "NVIDIA H200", 1.0e9));
  ASSERT_TRUE(train);
  EXPECT_EQ(train->precision_used, "bf16");
  EXPECT_DOUBLE_EQ(train->flops_per_sample, 3.0e9);  // training: 3 x forward
  EXPECT_DOUBLE_EQ(train->achieved_flops, 3.0e12);
  EXPECT_DOUBLE_EQ(*train->peak_flops, 2 * 989.4e12);
  EXPECT_DOUBLE_EQ(*train->mfu, 3.0e12 / (2 * 989.4e12));
  const auto infer = cell_flops(cell("infer", "cpu", 2.0e9));
  ASSERT_TRUE(infer);
  EXPECT_DOUBLE_EQ(infer->achieved_flops, 2.0e12);
  EXPECT_FALSE(infer->mfu) << "CPU: achieved FLOP/s only";
  auto without = cell("infer", "NVIDIA H200", 1.0e9);
  without["model_flops"] = nlohmann::json::object();
  EXPECT_FALSE(cell_flops(without)) << "no FLOPs (a TorchScript model): no row";
  auto failed = cell("infer", "NVIDIA H200", 1.0e9);
  failed["summary"] = nullptr;
  EXPECT_FALSE(cell_flops(failed));
}

}  // namespace
}  // namespace scalebench
