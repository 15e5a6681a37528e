// The worker's half of accuracy validation (Note [Accuracy validation] in common/cell/accuracy.h):
// per-rank comparison sums of two output tensors (SSIM included), their exact reduction over
// the group, and the fp32 math the reference runs under.
#pragma once

#include <mpi.h>
#include <torch/torch.h>

#include <utility>

#include "common/cell/accuracy.h"
#include "worker/models/zoo_model.h"

namespace scalebench {

/// Adds the comparison of `output` with `reference` (same shape; any floating dtype, layout
/// and device; compared in float64) to `sums`. `data_range` is the group's reference range
/// (SSIM's L); the first dimension counts samples.
void add_output_sums(const torch::Tensor& output, const torch::Tensor& reference, double data_range,
                     OutputSums& sums);

/// SSIM of x against y ([N,C,H,W] or [N,C,D,H,W], float64): the sum and the number of the
/// values of the SSIM map (Wang et al. 2004: Gaussian window 11, sigma 1.5, K1 0.01, K2
/// 0.03, "valid" windows only, per image and channel). The window shrinks to the largest odd
/// size that fits the smallest spatial size; {0, 0} for other ranks or a window below 3.
std::pair<double, double> ssim_sums(const torch::Tensor& x, const torch::Tensor& y,
                                    double data_range);

/// The element-wise SUM / MAX reduction of every rank's sums (MPI_Allreduce on `group`).
OutputSums reduce_output_sums(const OutputSums& mine, MPI_Comm group);

/// Copies every parameter and buffer of `from` into `to` (same architecture; layouts may
/// differ). Throws CellError(kValidation) when their state entries do not match.
void copy_weights(models::ZooModel& from, models::ZooModel& to);

/// Tests only ("a deliberately broken variant"): while `shift` is not 0, inference
/// validation adds shift x max|output| to every output of the cell before comparing, so
/// the verdict must fail. 0 (the default) leaves outputs alone; nothing but tests sets it.
void set_validation_output_shift_for_testing(double shift);
double validation_output_shift();

/// fp32 math while in scope: TF32 (cuBLAS and cuDNN) and cuDNN autotuning off; the previous
/// settings come back at the end of the scope.
class ReferenceMathScope {
 public:
  ReferenceMathScope();
  ~ReferenceMathScope();
  ReferenceMathScope(const ReferenceMathScope&) = delete;
  ReferenceMathScope& operator=(const ReferenceMathScope&) = delete;

 private:
  bool tf32_cublas_;
  bool tf32_cudnn_;
  bool cudnn_benchmark_;
};

}  // namespace scalebench
