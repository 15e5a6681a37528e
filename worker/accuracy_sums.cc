#include "worker/accuracy_sums.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "common/base/error.h"
#include "protocol/mpi_check.h"

namespace scalebench {
namespace {

constexpr int64_t kSsimWindow = 11;
constexpr double kSsimSigma = 1.5;
constexpr double kSsimK1 = 0.01;
constexpr double kSsimK2 = 0.03;

torch::Tensor gaussian_window(int64_t size) {
  const auto x = torch::arange(size, torch::kDouble) - static_cast<double>(size - 1) / 2.0;
  const auto g = torch::exp(-(x * x) / (2.0 * kSsimSigma * kSsimSigma));
  return g / g.sum();
}

/// Separable Gaussian blur of t ([B, 1, spatial...]) with valid windows only.
torch::Tensor blur(torch::Tensor t, const torch::Tensor& window, int64_t spatial_dims) {
  const int64_t size = window.size(0);
  for (int64_t d = 0; d < spatial_dims; ++d) {
    std::vector<int64_t> shape(static_cast<size_t>(spatial_dims + 2), 1);
    shape[static_cast<size_t>(2 + d)] = size;
    const auto kernel = window.view(shape);
    t = spatial_dims == 2 ? torch::conv2d(t, kernel) : torch::conv3d(t, kernel);
  }
  return t;
}

}  // namespace

std::pair<double, double> ssim_sums(const torch::Tensor& x, const torch::Tensor& y,
                                    double data_range) {
  const int64_t spatial_dims = x.dim() - 2;
  if (spatial_dims != 2 && spatial_dims != 3) return {0.0, 0.0};
  int64_t window = kSsimWindow;
  for (int64_t d = 2; d < x.dim(); ++d) window = std::min(window, x.size(d));
  if (window % 2 == 0) --window;
  if (window < 3) return {0.0, 0.0};
  const double range = data_range > 0 ? data_range : 1.0;
  const double c1 = (kSsimK1 * range) * (kSsimK1 * range);
  const double c2 = (kSsimK2 * range) * (kSsimK2 * range);
  std::vector<int64_t> flat = {x.size(0) * x.size(1), 1};
  for (int64_t d = 2; d < x.dim(); ++d) flat.push_back(x.size(d));
  const auto a = x.to(torch::kDouble).contiguous().view(flat);
  const auto b = y.to(torch::kDouble).contiguous().view(flat);
  const auto g = gaussian_window(window).to(a.device());
  const auto mu_a = blur(a, g, spatial_dims);
  const auto mu_b = blur(b, g, spatial_dims);
  const auto var_a = blur(a * a, g, spatial_dims) - mu_a * mu_a;
  const auto var_b = blur(b * b, g, spatial_dims) - mu_b * mu_b;
  const auto cov = blur(a * b, g, spatial_dims) - mu_a * mu_b;
  const auto map = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) /
                   ((mu_a * mu_a + mu_b * mu_b + c1) * (var_a + var_b + c2));
  return {map.sum().item<double>(), static_cast<double>(map.numel())};
}

void add_output_sums(const torch::Tensor& output, const torch::Tensor& reference, double data_range,
                     OutputSums& sums) {
  if (output.sizes() != reference.sizes()) {
    throw CellError(FailurePhase::kValidation,
                    "the cell's output has shape " + c10::str(output.sizes()) +
                        " but the reference's has " + c10::str(reference.sizes()));
  }
  const auto out = output.detach().to(torch::kDouble);
  const auto ref = reference.detach().to(torch::kDouble).to(out.device());
  const auto diff = (out - ref).abs();
  const auto ref_abs = ref.abs();
  sums.samples += out.dim() > 0 ? static_cast<double>(out.size(0)) : 1.0;
  sums.elements += static_cast<double>(out.numel());
  sums.sum_abs += diff.sum().item<double>();
  sums.sum_sq += (diff * diff).sum().item<double>();
  sums.sum_abs_ref += ref_abs.sum().item<double>();
  sums.dot += (out * ref).sum().item<double>();
  sums.out_sq += (out * out).sum().item<double>();
  sums.ref_sq += (ref * ref).sum().item<double>();
  if (out.numel() > 0) {
    sums.max_abs = std::max(sums.max_abs, diff.max().item<double>());
    sums.max_abs_ref = std::max(sums.max_abs_ref, ref_abs.max().item<double>());
  }
  const auto [ssim_sum, ssim_count] = ssim_sums(out, ref, data_range);
  sums.ssim_sum += ssim_sum;
  sums.ssim_count += ssim_count;
}

OutputSums reduce_output_sums(const OutputSums& mine, MPI_Comm group) {
  std::vector<double> sums = mine.sums();
  std::vector<double> maxima = mine.maxima();
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_DOUBLE,
                          MPI_SUM, group));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, maxima.data(), static_cast<int>(maxima.size()), MPI_DOUBLE,
                          MPI_MAX, group));
  return OutputSums::from(sums, maxima);
}

void copy_weights(models::ZooModel& from, models::ZooModel& to) {
  const auto source = from.state_entries();
  const auto target = to.state_entries();
  if (source.size() != target.size()) {
    throw CellError(FailurePhase::kValidation,
                    "the reference model has " + std::to_string(target.size()) +
                        " state entries, the cell's " + std::to_string(source.size()));
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i].first != target[i].first ||
        source[i].second.sizes() != target[i].second.sizes()) {
      throw CellError(FailurePhase::kValidation, "the reference model's state entry '" +
                                                     target[i].first + "' does not match '" +
                                                     source[i].first + "'");
    }
    target[i].second.copy_(source[i].second);
  }
}

namespace {
std::atomic<double> output_shift{0.0};
}  // namespace

void set_validation_output_shift_for_testing(double shift) { output_shift = shift; }

double validation_output_shift() { return output_shift; }

ReferenceMathScope::ReferenceMathScope()
    : tf32_cublas_(at::globalContext().allowTF32CuBLAS()),
      tf32_cudnn_(at::globalContext().allowTF32CuDNN()),
      cudnn_benchmark_(at::globalContext().benchmarkCuDNN()) {
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setBenchmarkCuDNN(false);
}

ReferenceMathScope::~ReferenceMathScope() {
  at::globalContext().setAllowTF32CuBLAS(tf32_cublas_);
  at::globalContext().setAllowTF32CuDNN(tf32_cudnn_);
  at::globalContext().setBenchmarkCuDNN(cudnn_benchmark_);
}

}  // namespace scalebench
