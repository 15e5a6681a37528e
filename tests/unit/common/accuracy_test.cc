// Note [Accuracy validation]: the reference's settings, the exact reduction's fields, the
// figures from reduced sums and the verdict, against hand-computed values.
#include "common/cell/accuracy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace scalebench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Accuracy, TheReferenceIsFp32WithEveryOptimizationOff) {
  CellSpec cell;
  cell.precision = Precision::kBf16;
  cell.channels_last = cell.tf32 = cell.cudnn_benchmark = cell.cuda_graphs = true;
  cell.pinned_memory = cell.optimizer.fused = cell.validate = cell.deterministic = true;
  cell.bucket_bytes = 4096;
  cell.batch_size = 32;
  cell.seed = 7;
  cell.compile = "aoti";
  const CellSpec reference = reference_cell(cell);
  EXPECT_EQ(reference.compile, "eager") << "a compiled twin is checked against eager";
  EXPECT_THAT(reference_description(), HasSubstr("eager"));
  EXPECT_EQ(reference.precision, Precision::kFp32);
  EXPECT_FALSE(reference.channels_last || reference.tf32 || reference.cudnn_benchmark ||
               reference.cuda_graphs || reference.pinned_memory || reference.optimizer.fused ||
               reference.validate);
  EXPECT_EQ(reference.bucket_bytes, CellSpec{}.bucket_bytes);
  EXPECT_TRUE(reference.deterministic) << "not an optimization: kept";
  EXPECT_EQ(reference.batch_size, 32);
  EXPECT_EQ(reference.seed, 7U);
}

TEST(Accuracy, SumsAndMaximaRoundTripInDeclarationOrder) {
  OutputSums sums{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  EXPECT_THAT(sums.sums(), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 9, 10));
  EXPECT_THAT(sums.maxima(), ElementsAre(11, 12));
  const OutputSums back = OutputSums::from(sums.sums(), sums.maxima());
  EXPECT_EQ(back.sums(), sums.sums());
  EXPECT_EQ(back.maxima(), sums.maxima());
}

// Outputs o = [1, 2, 3, 5], reference r = [1, 2, 3, 4] (one sample of 4 elements):
// |d| = [0, 0, 0, 1]; MAE 0.25, MSE 0.25, range 3, mae_rel 1/12, PSNR 10 log10(9 / 0.25),
// cosine (1 + 4 + 9 + 20) / sqrt(39 * 30).
OutputSums hand_sums() {
  OutputSums s;
  s.samples = 1;
  s.elements = 4;
  s.sum_abs = 1;
  s.sum_sq = 1;
  s.sum_abs_ref = 10;
  s.dot = 34;
  s.out_sq = 39;
  s.ref_sq = 30;
  s.max_abs = 1;
  s.max_abs_ref = 4;
  return s;
}

TEST(Accuracy, InferenceFiguresFromReducedSums) {
  const AccuracyReport report = finish_inference(hand_sums(), 1.0, 4.0, 0.5);
  const auto& v = report.values;
  EXPECT_EQ(report.kind, "inference");
  EXPECT_DOUBLE_EQ(v.at("mae"), 0.25);
  EXPECT_DOUBLE_EQ(v.at("mse"), 0.25);
  EXPECT_DOUBLE_EQ(v.at("rmse"), 0.5);
  EXPECT_DOUBLE_EQ(v.at("max_abs_error"), 1.0);
  EXPECT_DOUBLE_EQ(v.at("mean_rel_error"), 0.1);
  EXPECT_DOUBLE_EQ(v.at("max_rel_error"), 0.25);
  EXPECT_DOUBLE_EQ(v.at("reference_range"), 3.0);
  EXPECT_DOUBLE_EQ(v.at("mae_rel"), 0.25 / 3.0);
  EXPECT_DOUBLE_EQ(v.at("psnr_db"), 10.0 * std::log10(9.0 / 0.25));
  EXPECT_DOUBLE_EQ(v.at("cosine_similarity"), 34.0 / std::sqrt(39.0 * 30.0));
  EXPECT_EQ(v.count("ssim"), 0U) << "no SSIM for a shape without one";
  EXPECT_DOUBLE_EQ(v.at("elements"), 4.0);
  EXPECT_EQ(report.verdict, "passed");
  EXPECT_TRUE(report.failed_checks.empty());
}

TEST(Accuracy, TheVerdictNamesTheChecksThatFailed) {
  OutputSums sums = hand_sums();
  sums.ssim_sum = 1.8;  // mean SSIM 0.9
  sums.ssim_count = 2;
  const AccuracyReport report = finish_inference(sums, 1.0, 4.0, 0.05);
  EXPECT_DOUBLE_EQ(report.values.at("ssim"), 0.9);
  EXPECT_EQ(report.verdict, "failed");
  // mae_rel 0.0833 > 0.05 and 1-ssim 0.1 > 0.05 fail; 1-cosine 0.00466 passes.
  EXPECT_THAT(report.failed_checks, ElementsAre("mae_rel 0.08333 > 0.05", "1-ssim 0.1 > 0.05"));
  EXPECT_EQ(accuracy_summary(report), "FAIL mae_rel 0.08333 > 0.05");
}

TEST(Accuracy, IdenticalOutputsHaveInfinitePsnrAndPass) {
  OutputSums sums = hand_sums();
  sums.sum_abs = sums.sum_sq = sums.max_abs = 0;
  sums.dot = sums.out_sq = sums.ref_sq = 30;
  sums.ssim_sum = sums.ssim_count = 5;
  const AccuracyReport report = finish_inference(sums, 1.0, 4.0, 1e-9);
  EXPECT_TRUE(std::isinf(report.values.at("psnr_db")));
  EXPECT_DOUBLE_EQ(report.values.at("cosine_similarity"), 1.0);
  EXPECT_DOUBLE_EQ(report.values.at("ssim"), 1.0);
  EXPECT_EQ(report.verdict, "passed");
  EXPECT_EQ(accuracy_summary(report), "passed");
}

// PSNR of a known noise level: uniform error 0.1 on a reference of range 1 is 20 dB;
// orthogonal outputs have cosine 0 and fail.
TEST(Accuracy, KnownNoiseLevelAndOrthogonalOutputs) {
  OutputSums noisy;
  noisy.samples = 1;
  noisy.elements = 100;
  noisy.sum_abs = 100 * 0.1;
  noisy.sum_sq = 100 * 0.01;
  noisy.dot = noisy.out_sq = noisy.ref_sq = 50;
  const AccuracyReport report = finish_inference(noisy, 0.0, 1.0, 0.2);
  EXPECT_NEAR(report.values.at("psnr_db"), 20.0, 1e-12);
  EXPECT_NEAR(report.values.at("rmse"), 0.1, 1e-12);
  OutputSums orthogonal = noisy;  // o = (1, 0), r = (0, 1)
  orthogonal.dot = 0;
  orthogonal.out_sq = orthogonal.ref_sq = 1;
  const AccuracyReport apart = finish_inference(orthogonal, 0.0, 1.0, 0.2);
  EXPECT_EQ(apart.values.at("cosine_similarity"), 0.0);
  EXPECT_EQ(apart.verdict, "failed");
  EXPECT_EQ(apart.failed_checks.front(), "1-cosine 1 > 0.2");
}

TEST(Accuracy, NothingComparedIsNotAPass) {
  const AccuracyReport report = finish_inference(OutputSums{}, 0.0, 0.0, 0.01);
  EXPECT_TRUE(std::isnan(report.values.at("mae")));
  EXPECT_EQ(report.verdict, "failed");
  EXPECT_THAT(report.failed_checks.front(), HasSubstr("mae_rel nan"));
}

TEST(Accuracy, TrainingChecksLossDeviationAndParameterDistance) {
  TrainingComparison comparison;
  comparison.steps = 12;
  comparison.samples_per_step = 64;
  comparison.max_loss_rel_deviation = 0.002;
  comparison.param_rel_distance = 0.03;
  comparison.final_loss = 1.01;
  comparison.reference_final_loss = 1.0;
  const AccuracyReport report = finish_training(comparison, 0.01);
  EXPECT_EQ(report.kind, "training");
  EXPECT_DOUBLE_EQ(report.values.at("steps"), 12.0);
  EXPECT_DOUBLE_EQ(report.values.at("final_loss"), 1.01);
  EXPECT_EQ(report.verdict, "failed");
  EXPECT_THAT(report.failed_checks, ElementsAre("param_rel_distance 0.03 > 0.01"));
  comparison.param_rel_distance = 0.0;
  EXPECT_EQ(finish_training(comparison, 0.01).verdict, "passed");
}

TEST(Accuracy, AReferenceThatDisagreesWithItselfWidensTheTrainingChecksNeverNarrows) {
  // Note [Reference spread]: the H200's ResNet-50 AdamW figures.
  TrainingComparison comparison;
  comparison.max_loss_rel_deviation = 0.032;
  comparison.param_rel_distance = 0.12;
  AccuracyReport report = finish_training(comparison, 0.01);
  EXPECT_EQ(report.failed_checks.size(), 2U) << "no spread measured: the tolerance alone";
  EXPECT_EQ(report.values.count("reference_param_spread"), 0U);

  comparison.reference_loss_spread = 0.02;   // limit 0.04
  comparison.reference_param_spread = 0.05;  // limit 0.10: the distance still fails
  report = finish_training(comparison, 0.01);
  EXPECT_THAT(report.failed_checks, ElementsAre("param_rel_distance 0.12 > 0.1"));
  EXPECT_DOUBLE_EQ(report.values.at("reference_param_spread"), 0.05);
  EXPECT_DOUBLE_EQ(report.values.at("reference_loss_spread"), 0.02);

  comparison.reference_param_spread = 0.07;  // limit 0.14
  EXPECT_EQ(finish_training(comparison, 0.01).verdict, "passed");

  comparison.reference_loss_spread = comparison.reference_param_spread = 0.0;  // CPU: bit-exact
  EXPECT_THAT(finish_training(comparison, 0.01).failed_checks,
              ElementsAre("max_loss_rel_deviation 0.032 > 0.01", "param_rel_distance 0.12 > 0.01"));
}

}  // namespace
}  // namespace scalebench
