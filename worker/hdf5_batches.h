// Batches read from an HDF5 file: dataset `inputs` [rows, input_shape...] and dataset
// `targets` [rows] (class ids), [rows, spatial...] (voxel labels) or [rows, output...]
// (float targets of a float loss, Note [Targets]), read with a hyperslab per contiguous
// run of rows straight into the batch tensor (HDF5 converts the stored integer or float
// type to the model's input dtype, class targets to int64 and float targets to float32).
//
// Contract: opened once per cell on each rank (read-only; the HDF5 C library is used from
// the worker's main thread only). Global sample index i reads row i mod rows. Shapes are
// checked at open: the inputs' per-row shape must equal the cell's input_shape, targets
// must have as many rows, their per-row shape must be the TargetSpec's (when it has one),
// and class targets must be stored as integers. Labels are checked per batch against
// [0, num_classes), bce targets against [0, 1]. Targets not used (inference) are not
// opened: the file need not have them.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/hdf5/check.h"
#include "worker/batch_source.h"

namespace scalebench {

class Hdf5Batches : public BatchSource {
 public:
  /// `targets`: what the targets must be (cell_targets); its shape nullopt = any per-row
  /// shape (class ids of TorchScript models).
  /// Throws CellError(FailurePhase::kDataOpen) naming the file, the dataset and what to change.
  Hdf5Batches(const std::filesystem::path& path, const std::string& inputs_dataset,
              const std::string& targets_dataset, std::vector<int64_t> input_shape,
              torch::ScalarType input_dtype, TargetSpec targets, bool pin_memory);

  [[nodiscard]] HostBatch make_batch(SampleRange range) const override;
  /// data_open_s (open + checks, seconds) and data_rows.
  [[nodiscard]] std::map<std::string, double> metrics() const override;

  [[nodiscard]] int64_t rows() const { return rows_; }

 private:
  /// Opens `targets_dataset` and checks it against target_spec_ (rows_ is set).
  void open_targets(const std::string& targets_dataset);
  /// Reads rows [first, first + count) of `dataset` into `out` (row-major, `row_elements`
  /// elements per row) as `memory_type`.
  void read_rows(hid_t dataset, hid_t memory_type, int64_t first, int64_t count,
                 int64_t row_elements, void* out) const;
  /// Throws CellError(FailurePhase::kData) for a label or bce target out of range in
  /// `targets` (rows from `first`).
  void check_target_values(const torch::Tensor& targets, int64_t first) const;

  std::string path_;
  Hdf5Handle file_;
  Hdf5Handle inputs_;
  Hdf5Handle targets_;
  std::vector<int64_t> input_shape_;
  std::vector<int64_t> target_shape_;
  torch::ScalarType input_dtype_;
  TargetSpec target_spec_;
  bool pin_memory_;
  int64_t rows_ = 0;
  double open_s_ = 0.0;
};

}  // namespace scalebench
