// Accuracy across cells (issue 27): a cell's outputs and metrics against those of its
// baseline cell, another cell of the same matrix. Pure: no Torch, no MPI, no HDF5; rank 0
// compares what the results file holds (orchestrator/cross_cell_accuracy.h).
//
// Note [Accuracy across cells]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A program cannot be run twice inside one cell with its weights swapped, as a built-in model
// is (Note [Accuracy validation] in common/cell/accuracy.h), so a program cell with
// `validate: true` hands its outputs (`scalebench_client.outputs(array)`: the first
// validation_samples of them, split over the ranks as the data is) and its metrics
// (`scalebench_client.metric`) to the worker, rank 0 stores them in the cell's
// `validation_outputs` group, and once both a cell and its *baseline cell* are stored, rank 0
// compares them:
//  * outputs: rank r's array against the baseline's rank r array (same world size, so the
//    same shard of the same inputs), element by element, with the same sums, reduction and
//    checks as finish_inference (mae_rel, 1-cosine, 1-SSIM where the shape is an image or a
//    volume; MSE, PSNR and max errors reported);
//  * metrics named by the matrix (`baseline: {metrics: [val_loss]}`): the relative change
//    |value - baseline| / |baseline| of each rank's last value, checked against `tolerance`.
// The baseline cell is, per the matrix's `baseline:` (docs/accuracy.md#across-cells), the cell
// that differs only in its branch (`branch: main`) or the cell that differs only in the
// switches reference_cell turns off (`reference`, the default). The verdict, failed checks
// and the baseline cell's id are stored as the built-in comparison's are, so info, compare,
// the ablation and the report read them unchanged.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/cell/accuracy.h"

namespace scalebench {

/// A float32 array, row-major; shape[0] is the sample count.
struct OutputArray {
  std::vector<int64_t> shape;
  std::vector<float> values;
  bool operator==(const OutputArray&) const = default;
  /// The product of `shape` (1 for an empty shape).
  [[nodiscard]] int64_t element_count() const;
};

/// "[8, 3, 32, 32]".
std::string shape_text(const std::vector<int64_t>& shape);

/// The sums of Note [Accuracy validation] for one pair of arrays of the same shape (the
/// caller checks the shapes), SSIM included where `output` is [N, C, H, W] or [N, C, D, H, W]
/// (Gaussian window 11, sigma 1.5, valid positions only: the worker's definition), with
/// `data_range` the range of the reference outputs over the group.
OutputSums output_sums(const OutputArray& output, const OutputArray& reference, double data_range);

/// What one cell and its baseline hold, per rank of their groups (group order).
struct CrossCellInputs {
  std::vector<OutputArray> outputs;                    ///< empty where a rank handed none
  std::vector<OutputArray> baseline_outputs;           ///< idem
  std::vector<std::map<std::string, double>> metrics;  ///< each rank's metrics, by name
  std::vector<std::map<std::string, double>> baseline_metrics;
  std::vector<std::string> metric_names;  ///< the metrics compared (`baseline: {metrics}`)
  double tolerance = 0.01;
  std::string reference;  ///< the baseline cell in words, stored as `reference`
};

/// The comparison of Note [Accuracy across cells]. kind is "outputs" when outputs were
/// compared, else "metrics". A shape that differs from the baseline's, outputs or a metric
/// that one side lacks, or a world size that differs, is a failed check naming it. Throws
/// InputError when there is nothing to compare (no outputs on either side and no metric
/// names): the caller records that as the reason the cell was not compared.
AccuracyReport compare_with_baseline(const CrossCellInputs& inputs);

}  // namespace scalebench
