#include "common/cell/output_comparison.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/base/error.h"
#include "common/cell/stats.h"

namespace scalebench {
namespace {

constexpr int64_t kSsimWindow = 11;  // as worker/accuracy_sums.cc
constexpr double kSsimSigma = 1.5;
constexpr double kSsimK1 = 0.01;
constexpr double kSsimK2 = 0.03;

std::vector<double> gaussian_window(int64_t size) {
  std::vector<double> window(static_cast<size_t>(size));
  double total = 0;
  for (int64_t i = 0; i < size; ++i) {
    const double x = static_cast<double>(i) - static_cast<double>(size - 1) / 2.0;
    window[static_cast<size_t>(i)] = std::exp(-(x * x) / (2.0 * kSsimSigma * kSsimSigma));
    total += window[static_cast<size_t>(i)];
  }
  for (auto& w : window) w /= total;
  return window;
}

/// Correlation of row-major `values` (shape `dims`) with `window` along every dimension,
/// valid positions only (torch's conv without padding); `dims` becomes the result's shape.
std::vector<double> blur(std::vector<double> values, std::vector<int64_t>& dims,
                         const std::vector<double>& window) {
  const auto k = static_cast<int64_t>(window.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t outer = 1;
    int64_t inner = 1;
    for (size_t i = 0; i < d; ++i) outer *= dims[i];
    for (size_t i = d + 1; i < dims.size(); ++i) inner *= dims[i];
    const int64_t length = dims[d];
    const int64_t kept = length - k + 1;
    std::vector<double> out(static_cast<size_t>(outer * kept * inner), 0.0);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < kept; ++i) {
        double* row = &out[static_cast<size_t>((o * kept + i) * inner)];
        for (int64_t t = 0; t < k; ++t) {
          const double w = window[static_cast<size_t>(t)];
          const double* in = &values[static_cast<size_t>((o * length + i + t) * inner)];
          for (int64_t j = 0; j < inner; ++j) row[j] += w * in[j];
        }
      }
    }
    values = std::move(out);
    dims[d] = kept;
  }
  return values;
}

/// SSIM map sum and size over the images ([N*C] of `spatial` each) of two arrays.
std::pair<double, double> ssim_sums(const OutputArray& x, const OutputArray& y, double data_range) {
  const size_t spatial_dims = x.shape.size() < 2 ? 0 : x.shape.size() - 2;
  if (spatial_dims != 2 && spatial_dims != 3) return {0.0, 0.0};
  int64_t window = kSsimWindow;
  for (size_t d = 2; d < x.shape.size(); ++d) window = std::min(window, x.shape[d]);
  if (window % 2 == 0) --window;
  if (window < 3) return {0.0, 0.0};
  const double range = data_range > 0 ? data_range : 1.0;
  const double c1 = (kSsimK1 * range) * (kSsimK1 * range);
  const double c2 = (kSsimK2 * range) * (kSsimK2 * range);
  const std::vector<int64_t> spatial(x.shape.begin() + 2, x.shape.end());
  int64_t image_size = 1;
  for (const auto s : spatial) image_size *= s;
  const int64_t images = x.shape[0] * x.shape[1];
  const auto g = gaussian_window(window);
  double sum = 0;
  double count = 0;
  std::vector<double> a(static_cast<size_t>(image_size));
  std::vector<double> b(a.size());
  std::vector<double> aa(a.size());
  std::vector<double> bb(a.size());
  std::vector<double> ab(a.size());
  for (int64_t image = 0; image < images; ++image) {
    const size_t first = static_cast<size_t>(image * image_size);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = x.values[first + i];
      b[i] = y.values[first + i];
      aa[i] = a[i] * a[i];
      bb[i] = b[i] * b[i];
      ab[i] = a[i] * b[i];
    }
    std::vector<int64_t> dims = spatial;
    const auto mu_a = blur(a, dims, g);
    dims = spatial;
    const auto mu_b = blur(b, dims, g);
    dims = spatial;
    const auto e_aa = blur(aa, dims, g);
    dims = spatial;
    const auto e_bb = blur(bb, dims, g);
    dims = spatial;
    const auto e_ab = blur(ab, dims, g);
    for (size_t i = 0; i < mu_a.size(); ++i) {
      const double var_a = e_aa[i] - mu_a[i] * mu_a[i];
      const double var_b = e_bb[i] - mu_b[i] * mu_b[i];
      const double cov = e_ab[i] - mu_a[i] * mu_b[i];
      sum += ((2 * mu_a[i] * mu_b[i] + c1) * (2 * cov + c2)) /
             ((mu_a[i] * mu_a[i] + mu_b[i] * mu_b[i] + c1) * (var_a + var_b + c2));
    }
    count += static_cast<double>(mu_a.size());
  }
  return {sum, count};
}

}  // namespace

int64_t OutputArray::element_count() const {
  int64_t count = 1;
  for (const auto s : shape) count *= s;
  return count;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

OutputSums output_sums(const OutputArray& output, const OutputArray& reference, double data_range) {
  OutputSums sums;
  sums.samples = output.shape.empty() ? 1.0 : static_cast<double>(output.shape[0]);
  sums.elements = static_cast<double>(output.values.size());
  for (size_t i = 0; i < output.values.size(); ++i) {
    const double out = output.values[i];
    const double ref = reference.values[i];
    const double diff = std::abs(out - ref);
    sums.sum_abs += diff;
    sums.sum_sq += diff * diff;
    sums.sum_abs_ref += std::abs(ref);
    sums.dot += out * ref;
    sums.out_sq += out * out;
    sums.ref_sq += ref * ref;
    sums.max_abs = std::max(sums.max_abs, diff);
    sums.max_abs_ref = std::max(sums.max_abs_ref, std::abs(ref));
  }
  const auto [ssim_sum, ssim_count] = ssim_sums(output, reference, data_range);
  sums.ssim_sum = ssim_sum;
  sums.ssim_count = ssim_count;
  return sums;
}

AccuracyReport compare_with_baseline(const CrossCellInputs& inputs) {
  auto handed = [](const std::vector<OutputArray>& ranks) {
    return std::any_of(ranks.begin(), ranks.end(),
                       [](const OutputArray& a) { return !a.values.empty(); });
  };
  const bool outputs = handed(inputs.outputs) || handed(inputs.baseline_outputs);
  if (!outputs && inputs.metric_names.empty()) {
    throw InputError(
        "nothing to compare: neither the cell nor its baseline handed outputs "
        "(scalebench_client.outputs) and `baseline:` names no metrics");
  }
  std::vector<std::string> failed;
  AccuracyReport report;
  if (outputs) {
    if (inputs.outputs.size() != inputs.baseline_outputs.size()) {
      failed.push_back("world size " + std::to_string(inputs.outputs.size()) +
                       " differs from the baseline's " +
                       std::to_string(inputs.baseline_outputs.size()));
    }
    double low = std::numeric_limits<double>::infinity();
    double high = -low;
    for (const auto& reference : inputs.baseline_outputs) {
      for (const float v : reference.values) {
        low = std::min(low, static_cast<double>(v));
        high = std::max(high, static_cast<double>(v));
      }
    }
    if (low > high) low = high = 0;
    OutputSums group;
    const size_t ranks = std::min(inputs.outputs.size(), inputs.baseline_outputs.size());
    for (size_t r = 0; r < ranks; ++r) {
      const auto& out = inputs.outputs[r];
      const auto& ref = inputs.baseline_outputs[r];
      if (out.values.empty() != ref.values.empty()) {
        failed.push_back("rank " + std::to_string(r) + ": " +
                         (out.values.empty()
                              ? "no outputs, the baseline handed " + shape_text(ref.shape)
                              : "outputs " + shape_text(out.shape) + ", the baseline handed none"));
        continue;
      }
      if (out.shape != ref.shape) {
        failed.push_back("rank " + std::to_string(r) + ": output shape " + shape_text(out.shape) +
                         " differs from the baseline's " + shape_text(ref.shape));
        continue;
      }
      const OutputSums mine = output_sums(out, ref, high - low);
      auto sums = group.sums();
      const auto add = mine.sums();
      for (size_t i = 0; i < sums.size(); ++i) sums[i] += add[i];
      auto maxima = group.maxima();
      const auto more = mine.maxima();
      for (size_t i = 0; i < maxima.size(); ++i) maxima[i] = std::max(maxima[i], more[i]);
      group = OutputSums::from(sums, maxima);
    }
    report = finish_inference(group, low, high, inputs.tolerance);
    report.kind = "outputs";
    if (group.elements == 0) failed.push_back("no output element was compared");
  } else {
    report.kind = "metrics";
    report.values["tolerance"] = inputs.tolerance;
  }
  for (const auto& name : inputs.metric_names) {
    double worst = 0;
    if (inputs.metrics.size() != inputs.baseline_metrics.size() || inputs.metrics.empty()) {
      failed.push_back("metric " + name + ": " + std::to_string(inputs.metrics.size()) +
                       " ranks against the baseline's " +
                       std::to_string(inputs.baseline_metrics.size()));
      continue;
    }
    for (size_t r = 0; r < inputs.metrics.size(); ++r) {
      const auto mine = inputs.metrics[r].find(name);
      const auto theirs = inputs.baseline_metrics[r].find(name);
      if (mine == inputs.metrics[r].end() || theirs == inputs.baseline_metrics[r].end()) {
        failed.push_back("metric " + name + ": rank " + std::to_string(r) +
                         (mine == inputs.metrics[r].end() ? " did not report it"
                                                          : "'s baseline did not report it"));
        worst = std::numeric_limits<double>::quiet_NaN();
        break;
      }
      const double base = theirs->second;
      const double change = base != 0           ? std::abs(mine->second - base) / std::abs(base)
                            : mine->second == 0 ? 0.0
                                                : std::numeric_limits<double>::infinity();
      worst = std::max(worst, change);
    }
    report.values["metric_rel_change." + name] = worst;
    if (!(worst <= inputs.tolerance) && !std::isnan(worst)) {
      failed.push_back("metric " + name + " rel. change " + short_number_text(worst) + " > " +
                       short_number_text(inputs.tolerance));
    }
  }
  report.failed_checks.insert(report.failed_checks.end(), failed.begin(), failed.end());
  report.verdict = report.failed_checks.empty() ? "passed" : "failed";
  report.reference = inputs.reference;
  return report;
}

}  // namespace scalebench
