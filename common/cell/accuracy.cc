#include "common/cell/accuracy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/cell/stats.h"

namespace scalebench {
namespace {

/// Adds "<name> <value> > <tolerance>" to the failed checks when value > tolerance (NaN
/// fails too: a comparison that produced no number is not a pass).
void check(AccuracyReport& report, const std::string& name, double value, double tolerance) {
  if (value <= tolerance) return;
  report.failed_checks.push_back(name + " " + short_number_text(value) + " > " +
                                 short_number_text(tolerance));
}

void set_verdict(AccuracyReport& report) {
  report.verdict = report.failed_checks.empty() ? "passed" : "failed";
}

}  // namespace

CellSpec reference_cell(const CellSpec& cell) {
  CellSpec reference = cell;
  const CellSpec defaults;
  reference.precision = Precision::kFp32;
  reference.channels_last = false;
  reference.tf32 = false;
  reference.cudnn_benchmark = false;
  reference.cuda_graphs = false;
  reference.compile = defaults.compile;
  reference.pinned_memory = false;
  reference.optimizer.fused = false;
  reference.bucket_bytes = defaults.bucket_bytes;
  reference.first_bucket_bytes = defaults.first_bucket_bytes;
  reference.validate = false;
  return reference;
}

std::string reference_description() {
  return "same weights and inputs in fp32, eager; channels_last, tf32, cudnn_benchmark, "
         "cuda_graphs, pinned_memory, optimizer.fused off; default DDP buckets";
}

std::vector<double> OutputSums::sums() const {
  return {samples, elements, sum_abs, sum_sq,   sum_abs_ref,
          dot,     out_sq,   ref_sq,  ssim_sum, ssim_count};
}

std::vector<double> OutputSums::maxima() const { return {max_abs, max_abs_ref}; }

OutputSums OutputSums::from(const std::vector<double>& sums, const std::vector<double>& maxima) {
  OutputSums out;
  if (sums.size() != kSums || maxima.size() != kMaxima) return out;
  out.samples = sums[0];
  out.elements = sums[1];
  out.sum_abs = sums[2];
  out.sum_sq = sums[3];
  out.sum_abs_ref = sums[4];
  out.dot = sums[5];
  out.out_sq = sums[6];
  out.ref_sq = sums[7];
  out.ssim_sum = sums[8];
  out.ssim_count = sums[9];
  out.max_abs = maxima[0];
  out.max_abs_ref = maxima[1];
  return out;
}

AccuracyReport finish_inference(const OutputSums& group, double reference_min, double reference_max,
                                double tolerance) {
  AccuracyReport report;
  report.kind = "inference";
  report.reference = reference_description();
  auto& v = report.values;
  const double n = group.elements;
  const double range = reference_max - reference_min;
  v["tolerance"] = tolerance;
  v["validation_samples"] = group.samples;
  v["elements"] = n;
  v["mae"] = n > 0 ? group.sum_abs / n : kNaN;
  v["mse"] = n > 0 ? group.sum_sq / n : kNaN;
  v["rmse"] = std::sqrt(v["mse"]);
  v["max_abs_error"] = group.max_abs;
  v["mean_rel_error"] = group.sum_abs_ref > 0 ? group.sum_abs / group.sum_abs_ref
                        : group.sum_abs == 0  ? 0.0
                                              : kNaN;
  v["max_rel_error"] = group.max_abs_ref > 0 ? group.max_abs / group.max_abs_ref
                       : group.max_abs == 0  ? 0.0
                                             : kNaN;
  v["reference_range"] = range;
  // A constant reference has no range: the error is then judged against 1 (absolute).
  const double scale = range > 0 ? range : 1.0;
  v["mae_rel"] = v["mae"] / scale;
  v["psnr_db"] = v["mse"] == 0 ? std::numeric_limits<double>::infinity()
                               : 10.0 * std::log10(scale * scale / v["mse"]);
  const double norms = std::sqrt(group.out_sq) * std::sqrt(group.ref_sq);
  v["cosine_similarity"] = norms > 0                                  ? group.dot / norms
                           : (group.out_sq == 0 && group.ref_sq == 0) ? 1.0
                                                                      : 0.0;
  check(report, "mae_rel", v["mae_rel"], tolerance);
  check(report, "1-cosine", 1.0 - v["cosine_similarity"], tolerance);
  if (group.ssim_count > 0) {
    v["ssim"] = group.ssim_sum / group.ssim_count;
    check(report, "1-ssim", 1.0 - v["ssim"], tolerance);
  }
  set_verdict(report);
  return report;
}

AccuracyReport finish_training(const TrainingComparison& comparison, double tolerance) {
  AccuracyReport report;
  report.kind = "training";
  report.reference = reference_description();
  auto& v = report.values;
  v["tolerance"] = tolerance;
  v["steps"] = static_cast<double>(comparison.steps);
  v["validation_samples"] = comparison.samples_per_step;
  v["max_loss_rel_deviation"] = comparison.max_loss_rel_deviation;
  v["final_loss"] = comparison.final_loss;
  v["reference_final_loss"] = comparison.reference_final_loss;
  v["param_rel_distance"] = comparison.param_rel_distance;
  // Note [Reference spread]: a measured spread widens a check, never narrows it.
  const auto limit = [tolerance](double spread) {
    return std::isnan(spread) ? tolerance : std::max(tolerance, kReferenceSpreadFactor * spread);
  };
  if (!std::isnan(comparison.reference_loss_spread)) {
    v["reference_loss_spread"] = comparison.reference_loss_spread;
  }
  if (!std::isnan(comparison.reference_param_spread)) {
    v["reference_param_spread"] = comparison.reference_param_spread;
  }
  check(report, "max_loss_rel_deviation", comparison.max_loss_rel_deviation,
        limit(comparison.reference_loss_spread));
  check(report, "param_rel_distance", comparison.param_rel_distance,
        limit(comparison.reference_param_spread));
  set_verdict(report);
  return report;
}

std::string accuracy_summary(const AccuracyReport& report) {
  if (report.verdict == "passed") return "passed";
  return "FAIL" + (report.failed_checks.empty() ? std::string() : " " + report.failed_checks[0]);
}

}  // namespace scalebench
