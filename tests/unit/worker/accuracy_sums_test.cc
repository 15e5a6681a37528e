// Note [Accuracy validation]: the worker's comparison sums, SSIM against a direct
// computation of its definition, and the reference's weights and math.
#include "worker/accuracy_sums.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/base/error.h"
#include "common/cell/output_comparison.h"
#include "worker/model_zoo.h"
#include "worker/workload.h"

namespace scalebench {
namespace {

/// SSIM straight from its definition, one window position at a time (2D, one image and
/// channel, window `w`, sigma 1.5): the check of the separable-convolution version.
double direct_ssim_2d(const torch::Tensor& x, const torch::Tensor& y, int64_t w, double range) {
  std::vector<double> g(static_cast<size_t>(w));
  double total = 0;
  for (int64_t i = 0; i < w; ++i) {
    const double d = static_cast<double>(i) - static_cast<double>(w - 1) / 2.0;
    g[static_cast<size_t>(i)] = std::exp(-d * d / (2 * 1.5 * 1.5));
    total += g[static_cast<size_t>(i)];
  }
  for (auto& v : g) v /= total;
  const auto a = x.accessor<double, 2>();
  const auto b = y.accessor<double, 2>();
  const double c1 = std::pow(0.01 * range, 2), c2 = std::pow(0.03 * range, 2);
  double sum = 0;
  int64_t count = 0;
  for (int64_t r = 0; r + w <= x.size(0); ++r) {
    for (int64_t c = 0; c + w <= x.size(1); ++c) {
      double ma = 0, mb = 0, saa = 0, sbb = 0, sab = 0;
      for (int64_t i = 0; i < w; ++i) {
        for (int64_t j = 0; j < w; ++j) {
          const double k = g[static_cast<size_t>(i)] * g[static_cast<size_t>(j)];
          const double va = a[r + i][c + j], vb = b[r + i][c + j];
          ma += k * va;
          mb += k * vb;
          saa += k * va * va;
          sbb += k * vb * vb;
          sab += k * va * vb;
        }
      }
      const double va = saa - ma * ma, vb = sbb - mb * mb, cov = sab - ma * mb;
      sum += ((2 * ma * mb + c1) * (2 * cov + c2)) / ((ma * ma + mb * mb + c1) * (va + vb + c2));
      ++count;
    }
  }
  return sum / static_cast<double>(count);
}

TEST(AccuracySums, Ssim2dEqualsItsDefinition) {
  torch::manual_seed(1);
  const auto x = torch::rand({1, 1, 20, 17}, torch::kDouble);
  const auto y = x + 0.1 * torch::randn({1, 1, 20, 17}, torch::kDouble);
  const auto [sum, count] = ssim_sums(x, y, 1.0);
  EXPECT_EQ(count, 10.0 * 7.0) << "valid 11x11 windows of a 20x17 image";
  EXPECT_NEAR(sum / count, direct_ssim_2d(x[0][0], y[0][0], 11, 1.0), 1e-12);
  EXPECT_LT(sum / count, 0.99);
}

// A reference implementation's value, computed once and written here: scikit-image 0.25
// structural_similarity(x, y, data_range=x.max()-x.min(), gaussian_weights=True, sigma=1.5,
// use_sample_covariance=False) of this 24x24 image and itself shifted by one column.
TEST(AccuracySums, SsimOfAShiftedImageMatchesScikitImage) {
  const auto i = torch::arange(24, torch::kDouble).unsqueeze(1);
  const auto j = torch::arange(24, torch::kDouble).unsqueeze(0);
  const auto x =
      torch::sin(i * 0.3) + torch::cos(j * 0.2) + 0.1 * torch::remainder(i * 7 + j * 3, 5);
  const auto y = torch::roll(x, 1, 1);
  const double range = (x.max() - x.min()).item<double>();
  const auto [sum, count] = ssim_sums(x.view({1, 1, 24, 24}), y.view({1, 1, 24, 24}), range);
  EXPECT_NEAR(sum / count, 0.6421373750078155, 1e-4);
}

TEST(AccuracySums, SsimWindowShrinksToSmallImagesAndIsOneForIdenticalOnes) {
  torch::manual_seed(2);
  const auto x = torch::rand({2, 3, 8, 8}, torch::kDouble);
  const auto [sum, count] = ssim_sums(x, x, 1.0);
  EXPECT_EQ(count, 2.0 * 3.0 * 2.0 * 2.0) << "window 7 on 8x8: 2x2 positions";
  EXPECT_NEAR(sum / count, 1.0, 1e-12);
  const auto y = x + 0.05 * torch::randn_like(x);
  const auto [noisy, n] = ssim_sums(y, x, 1.0);
  double direct = 0;  // every image and channel has the same number of windows
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t c = 0; c < 3; ++c) direct += direct_ssim_2d(y[i][c], x[i][c], 7, 1.0);
  }
  EXPECT_NEAR(noisy / n, direct / 6.0, 1e-12);
  EXPECT_EQ(ssim_sums(torch::rand({2, 5}), torch::rand({2, 5}), 1.0).second, 0.0)
      << "logits have no SSIM";
  EXPECT_EQ(ssim_sums(torch::rand({1, 1, 2, 40}), torch::rand({1, 1, 2, 40}), 1.0).second, 0.0)
      << "a window below 3 gives none";
}

TEST(AccuracySums, Ssim3dOfIdenticalVolumesIsOneAndDropsWithNoise) {
  torch::manual_seed(3);
  const auto x = torch::rand({1, 2, 12, 12, 12}, torch::kDouble);
  const auto [same, count] = ssim_sums(x, x, 1.0);
  EXPECT_EQ(count, 2.0 * 2 * 2 * 2);
  EXPECT_NEAR(same / count, 1.0, 1e-12);
  const auto [noisy, n] = ssim_sums(x + 0.2 * torch::randn_like(x), x, 1.0);
  EXPECT_LT(noisy / n, 0.95);
}

TEST(AccuracySums, OutputSumsByHand) {
  OutputSums sums;
  add_output_sums(torch::tensor({{1.0, 2.0}, {3.0, 5.0}}), torch::tensor({{1.0, 2.0}, {3.0, 4.0}}),
                  3.0, sums);
  EXPECT_EQ(sums.samples, 2.0);
  EXPECT_EQ(sums.elements, 4.0);
  EXPECT_DOUBLE_EQ(sums.sum_abs, 1.0);
  EXPECT_DOUBLE_EQ(sums.sum_sq, 1.0);
  EXPECT_DOUBLE_EQ(sums.sum_abs_ref, 10.0);
  EXPECT_DOUBLE_EQ(sums.dot, 34.0);
  EXPECT_DOUBLE_EQ(sums.out_sq, 39.0);
  EXPECT_DOUBLE_EQ(sums.ref_sq, 30.0);
  EXPECT_DOUBLE_EQ(sums.max_abs, 1.0);
  EXPECT_DOUBLE_EQ(sums.max_abs_ref, 4.0);
  EXPECT_EQ(sums.ssim_count, 0.0);
  EXPECT_THROW(add_output_sums(torch::zeros({2}), torch::zeros({3}), 1.0, sums), CellError);
}

/// `t` as the plain array of Note [Accuracy across cells].
OutputArray as_output_array(const torch::Tensor& t) {
  const auto f = t.to(torch::kFloat).contiguous();
  OutputArray a;
  a.shape = f.sizes().vec();
  a.values.assign(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
  return a;
}

TEST(AccuracySums, ThePlainComparisonAcrossCellsEqualsTheWorkers) {
  // Rank 0 compares handed outputs without Torch (common/cell/output_comparison.cc): the
  // same sums and SSIM as here, for images, volumes and flat outputs.
  torch::manual_seed(5);
  for (const auto& shape :
       std::vector<std::vector<int64_t>>{{3, 2, 20, 17}, {2, 1, 9, 12, 13}, {5, 7}, {2, 1, 4, 4}}) {
    const auto ref = torch::rand(shape).to(torch::kFloat);
    const auto out = (ref + 0.05 * torch::randn_like(ref)).to(torch::kFloat);
    OutputSums torch_sums;
    add_output_sums(out, ref, 1.0, torch_sums);
    const OutputSums plain = output_sums(as_output_array(out), as_output_array(ref), 1.0);
    const auto a = torch_sums.sums();
    const auto b = plain.sums();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(a[i], b[i], 1e-9 * std::max(1.0, std::abs(a[i]))) << "sum " << i;
    }
    EXPECT_NEAR(torch_sums.max_abs, plain.max_abs, 1e-12);
  }
}

TEST(AccuracySums, CopiedWeightsGiveTheSameOutputsWhateverTheLayout) {
  torch::manual_seed(4);
  const auto model = find_model("resnet18").build({3, 32, 32}, 4);
  torch::manual_seed(5);  // a different initialisation
  const auto other = find_model("resnet18").build({3, 32, 32}, 4);
  module_to_channels_last(*model);
  copy_weights(*model, *other);
  model->eval();
  other->eval();
  torch::NoGradGuard no_grad;
  const auto input = torch::randn({2, 3, 32, 32});
  EXPECT_TRUE(
      torch::allclose(model->forward(to_channels_last(input)), other->forward(input), 1e-5, 1e-5));
  const auto mlp = find_model("mlp").build({16}, 2);
  EXPECT_THROW(copy_weights(*model, *mlp), CellError);
}

}  // namespace
}  // namespace scalebench
