// Accuracy validation (issue 13): the reference a cell is compared with, the exact
// reduction of the comparison, the metrics and the verdict. Pure (no Torch, no MPI): the
// worker computes the per-rank sums (worker/accuracy_sums.h) and reduces them over the
// group; everything after that is here and unit tested.
//
// Note [Accuracy validation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A cell with `validate: true` is compared, after its timed loop and after its peak memory
// is read, outside every timer (per-rank metric validation_s), with a *reference*: the
// same weights and inputs in fp32 with every optimization switch off (reference_cell).
//
// Inference: each rank runs its shard of the first `validation_samples` samples through the
// model as the cell ran it (precision, channels-last, CUDA graphs) and through a copy of
// the same weights as the reference, and adds up OutputSums. Sums, counts, maxima and
// minima are reduced over the group exactly, never averages of averages, so the figures
// equal a single process comparing every sample, and every rank computes the same ones
// (finish_inference). SSIM needs the data range before its sums: one MIN/MAX reduction of
// the reference outputs comes first.
//
// Training: the reference is a second training run of the same number of steps (warm-up
// included) from the same initial weights and batches, in the reference settings, on the
// same group; each step's loss and the final parameters are compared (finish_training).
//
// The verdict is `passed` when every check holds against `tolerance` (training: against the
// reference's own spread where that is larger, Note [Reference spread]): mae_rel (mean
// absolute error / reference range), 1 - cosine similarity, 1 - SSIM where it is defined;
// for training the largest relative loss deviation of any step and rank, and the relative
// parameter distance. max_abs_error and PSNR are reported, not checked: one outlier element
// of a half-precision output is normal and says little about the model's outputs.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/cell/cell_spec.h"

namespace scalebench {

struct AccuracyReport {
  std::string kind;                        ///< "inference" or "training"
  std::string verdict;                     ///< "passed" or "failed"
  std::vector<std::string> failed_checks;  ///< "mae_rel 0.0213 > 0.01", ...
  std::string reference;                   ///< how the reference ran, in words
  std::map<std::string, double> values;    ///< tolerance, mae, ... (results-layout.md)
  bool operator==(const AccuracyReport&) const = default;
};

/// What the reference of `cell` runs: fp32, eager (compile), and channels_last, tf32,
/// cudnn_benchmark, cuda_graphs, pinned_memory, optimizer.fused off, default DDP buckets,
/// validate off;
/// everything else (model, weights, data, seed, batch, deterministic) as in `cell`.
CellSpec reference_cell(const CellSpec& cell);

/// reference_cell in words, as stored in the results (attribute `reference`).
std::string reference_description();

/// One rank's comparison of its outputs with the reference outputs: every field is a sum
/// or a maximum over the rank's elements, so the group's figures are the element-wise SUM
/// (sums) and MAX (maxima) of the ranks' (Note [Accuracy validation]).
struct OutputSums {
  // reduced with SUM
  double samples = 0;      ///< samples compared
  double elements = 0;     ///< output elements compared
  double sum_abs = 0;      ///< sum |out - ref|
  double sum_sq = 0;       ///< sum (out - ref)^2
  double sum_abs_ref = 0;  ///< sum |ref|
  double dot = 0;          ///< sum out * ref
  double out_sq = 0;       ///< sum out^2
  double ref_sq = 0;       ///< sum ref^2
  double ssim_sum = 0;     ///< sum of the SSIM map's values
  double ssim_count = 0;   ///< values of the SSIM map (0: no SSIM for this output shape)
  // reduced with MAX
  double max_abs = 0;      ///< max |out - ref|
  double max_abs_ref = 0;  ///< max |ref|

  static constexpr int kSums = 10;
  static constexpr int kMaxima = 2;
  /// The SUM fields, then the MAX fields, in declaration order (for MPI reductions).
  [[nodiscard]] std::vector<double> sums() const;
  [[nodiscard]] std::vector<double> maxima() const;
  static OutputSums from(const std::vector<double>& sums, const std::vector<double>& maxima);
};

/// The figures and verdict of an inference comparison from the group's reduced sums and
/// the reference outputs' minimum and maximum over the group.
AccuracyReport finish_inference(const OutputSums& group, double reference_min, double reference_max,
                                double tolerance);

/// A training comparison, already reduced over the group.
struct TrainingComparison {
  int64_t steps = 0;                  ///< steps compared (warm-up included)
  double samples_per_step = 0;        ///< batch_size * world_size
  double max_loss_rel_deviation = 0;  ///< max over steps and ranks of |loss - ref| / |ref|
  double final_loss = 0;              ///< group mean of the last step's loss
  double reference_final_loss = 0;
  double param_rel_distance = 0;  ///< ||p - p_ref|| / ||p_ref|| after the last step
  /// Note [Reference spread]: the same two figures between two runs of the reference,
  /// measured when a check failed against the tolerance; NaN when not measured.
  double reference_loss_spread = std::numeric_limits<double>::quiet_NaN();
  double reference_param_spread = std::numeric_limits<double>::quiet_NaN();
};

// Note [Reference spread]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A training comparison cannot be tighter than the reference agrees with itself. On a GPU
// training is not bit-reproducible (cuDNN and cuBLAS reduce in varying orders, atomics
// accumulate), and an adaptive optimizer (Adam, AdamW) moves every parameter by about lr a
// step whatever the size of its gradient, so elements whose gradient is near zero follow the
// rounding noise: two runs of the reference itself end apart. On an H200, ResNet-50 in fp32
// with AdamW failed its own validation after 20 steps (loss 0.032, parameters 0.12 apart;
// docs/gpu-verification.md). So when a training check fails against `tolerance`, the
// reference runs a second time and the two references are compared as the cell was
// (reference_loss_spread, reference_param_spread); the check then fails only where the
// cell's figure exceeds max(tolerance, kReferenceSpreadFactor x the spread): a deviation
// within twice the reference's own spread cannot be told from its noise. On the CPU, and
// with `deterministic: true`, the reference repeats bit for bit: the spread is 0 and the
// tolerance alone decides. The second run costs one more reference pass, for failing cells
// only.
inline constexpr double kReferenceSpreadFactor = 2.0;

AccuracyReport finish_training(const TrainingComparison& comparison, double tolerance);

/// "passed", or "FAIL mae_rel 0.0213 > 0.01" (the first failed check): one table cell.
std::string accuracy_summary(const AccuracyReport& report);

}  // namespace scalebench
