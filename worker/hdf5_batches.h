// Batches read from an HDF5 file: dataset `inputs` [rows, input_shape...] and dataset
// `targets` [rows] (class ids) or [rows, spatial...] (voxel labels), read with a hyperslab
// per contiguous run of rows straight into the batch tensor (HDF5 converts the stored
// integer or float type to the model's input dtype and targets to int64).
//
// Contract: opened once per cell on each rank (read-only; the HDF5 C library is used from
// the worker's main thread only). Global sample index i reads row i mod rows. Shapes are
// checked at open: the inputs' per-row shape must equal the cell's input_shape, targets
// must have as many rows, and for zoo models the per-row target shape must be the
// model's. Labels are checked per batch against [0, num_classes).
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
  /// `expected_target_shape`: the per-row target shape the model needs ({} = class ids);
  /// nullopt = any (TorchScript models).
  /// Throws CellError(FailurePhase::kDataOpen) naming the file, the dataset and what to change.
  Hdf5Batches(const std::filesystem::path& path, const std::string& inputs_dataset,
              const std::string& targets_dataset, std::vector<int64_t> input_shape,
              torch::ScalarType input_dtype,
              std::optional<std::vector<int64_t>> expected_target_shape, int64_t num_classes,
              bool pin_memory);

  [[nodiscard]] HostBatch make_batch(SampleRange range) const override;
  /// data_open_s (open + checks, seconds) and data_rows.
  [[nodiscard]] std::map<std::string, double> metrics() const override;

  [[nodiscard]] int64_t rows() const { return rows_; }

 private:
  /// Reads rows [first, first + count) of `dataset` into `out` (row-major, `row_elements`
  /// elements per row) as `memory_type`.
  void read_rows(hid_t dataset, hid_t memory_type, int64_t first, int64_t count,
                 int64_t row_elements, void* out) const;

  std::string path_;
  Hdf5Handle file_;
  Hdf5Handle inputs_;
  Hdf5Handle targets_;
  std::vector<int64_t> input_shape_;
  std::vector<int64_t> target_shape_;
  torch::ScalarType input_dtype_;
  int64_t num_classes_;
  bool pin_memory_;
  int64_t rows_ = 0;
  double open_s_ = 0.0;
};

}  // namespace scalebench
