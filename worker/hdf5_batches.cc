#include "worker/hdf5_batches.h"

#include <hdf5.h>

#include <functional>

#include "common/base/error.h"
#include "common/cell/output_comparison.h"

namespace scalebench {
namespace {

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (const int64_t extent : shape) count *= extent;
  return count;
}

/// Runs `body`, turning an Hdf5Error into CellError(phase) that names `what`.
template <typename Body>
auto as_cell_error(FailurePhase phase, const std::string& what, Body&& body) {
  try {
    return body();
  } catch (const Hdf5Error& error) {
    throw CellError(phase, what + ": " + error.what());
  }
}

/// Dims of an open dataset; refuses types HDF5 cannot convert to numbers.
std::vector<int64_t> numeric_dims(hid_t dataset, const std::string& what) {
  const auto type = own_datatype(HDF5_CHECK(H5Dget_type(dataset)));
  const H5T_class_t type_class = H5Tget_class(type);
  if (type_class != H5T_INTEGER && type_class != H5T_FLOAT) {
    throw CellError(FailurePhase::kDataOpen,
                    what +
                        " is not an integer or floating-point dataset: store "
                        "numbers (e.g. float32 inputs, int64 labels)");
  }
  const auto space = own_dataspace(HDF5_CHECK(H5Dget_space(dataset)));
  const int rank = HDF5_CHECK(H5Sget_simple_extent_ndims(space));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  HDF5_CHECK(H5Sget_simple_extent_dims(space, dims.data(), nullptr));
  return {dims.begin(), dims.end()};
}

/// "int32", "uint8", "float64", ... of an open numeric dataset.
std::string dtype_text(hid_t dataset) {
  const auto type = own_datatype(HDF5_CHECK(H5Dget_type(dataset)));
  const auto bits = std::to_string(8 * H5Tget_size(type));
  if (H5Tget_class(type) == H5T_FLOAT) return "float" + bits;
  return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + bits;
}

bool is_float_dataset(hid_t dataset) {
  const auto type = own_datatype(HDF5_CHECK(H5Dget_type(dataset)));
  return H5Tget_class(type) == H5T_FLOAT;
}

/// Opens dataset `name` of `file` (the caller has checked that it exists).
Hdf5Handle open_dataset(hid_t file, const std::string& name, const std::string& path) {
  return as_cell_error(
      FailurePhase::kDataOpen, "cannot open dataset '" + name + "' of " + path,
      [&] { return own_dataset(HDF5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT))); });
}

hid_t memory_type_of(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32:
      return H5T_NATIVE_FLOAT;
    case torch::kInt64:
      return H5T_NATIVE_INT64;
    default:
      throw CellError(FailurePhase::kDataOpen,
                      std::string("no HDF5 reading for input dtype ") + c10::toString(dtype));
  }
}

}  // namespace

Hdf5Batches::Hdf5Batches(const std::filesystem::path& path, const std::string& inputs_dataset,
                         const std::string& targets_dataset, std::vector<int64_t> input_shape,
                         torch::ScalarType input_dtype, TargetSpec targets, bool pin_memory)
    : path_(path.string()),
      input_shape_(std::move(input_shape)),
      input_dtype_(input_dtype),
      target_spec_(std::move(targets)),
      pin_memory_(pin_memory) {
  const auto start = std::chrono::steady_clock::now();
  silence_hdf5_error_printing();
  if (H5Fis_hdf5(path_.c_str()) <= 0) {
    throw CellError(
        FailurePhase::kDataOpen,
        "data file " + path_ + " is missing or not an HDF5 file: write it with h5py " +
            (target_spec_.used ? "(datasets '" + inputs_dataset + "' and '" + targets_dataset + "')"
                               : "(dataset '" + inputs_dataset + "')"));
  }
  file_ = as_cell_error(FailurePhase::kDataOpen, "cannot open data file " + path_, [&] {
    return own_file(HDF5_CHECK(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  });
  if (H5Lexists(file_, inputs_dataset.c_str(), H5P_DEFAULT) <= 0) {
    throw CellError(FailurePhase::kDataOpen,
                    "data file " + path_ + " has no dataset '" + inputs_dataset +
                        "': set data.inputs / data.targets to the datasets' names (h5ls -r " +
                        path_ + " lists them)");
  }
  inputs_ = open_dataset(file_, inputs_dataset, path_);
  const std::string inputs_what = "dataset '" + inputs_dataset + "' of " + path_;
  const auto input_dims = numeric_dims(inputs_, inputs_what);
  memory_type_of(input_dtype_);
  if (input_dims.empty() || input_dims[0] < 1) {
    throw CellError(FailurePhase::kDataOpen,
                    inputs_what + " has no rows: its first dimension counts samples");
  }
  rows_ = input_dims[0];
  const std::vector<int64_t> input_row(input_dims.begin() + 1, input_dims.end());
  if (input_row != input_shape_) {
    throw CellError(FailurePhase::kDataOpen,
                    inputs_what + " has rows of shape " + shape_text(input_row) +
                        ", the cell's input_shape is " + shape_text(input_shape_) +
                        ": set the experiment's input_shape to " + shape_text(input_row));
  }
  if (target_spec_.used) open_targets(targets_dataset);
  open_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Hdf5Batches::open_targets(const std::string& targets_dataset) {
  const bool values = target_spec_.is_float();
  const std::string needed =
      values ? "float targets of the model output's shape " +
                   shape_text(target_spec_.shape.value_or(std::vector<int64_t>{})) +
                   (target_spec_.kind == TargetSpec::Kind::kUnitValues ? ", in [0, 1]" : "")
             : std::string("integer class ids in [0, num_classes)");
  if (H5Lexists(file_, targets_dataset.c_str(), H5P_DEFAULT) <= 0) {
    throw CellError(FailurePhase::kDataOpen,
                    "data file " + path_ + " has no dataset '" + targets_dataset +
                        "': training with loss " + target_spec_.loss + " needs " + needed +
                        " per input row; set data.targets to the targets' dataset (h5ls -r " +
                        path_ +
                        " lists them), or run the experiment in mode infer, which "
                        "reads no targets");
  }
  targets_ = open_dataset(file_, targets_dataset, path_);
  const std::string what = "dataset '" + targets_dataset + "' of " + path_;
  const auto dims = numeric_dims(targets_, what);
  if (dims.empty() || dims[0] != rows_) {
    throw CellError(
        FailurePhase::kDataOpen,
        what + " has " +
            (dims.empty() ? std::string("no dimensions") : std::to_string(dims[0]) + " rows") +
            ", the inputs have " + std::to_string(rows_) + ": store one target per input row");
  }
  target_shape_.assign(dims.begin() + 1, dims.end());
  const std::string stored = what + " holds " + dtype_text(targets_) + " " + shape_text(dims);
  if (!values && is_float_dataset(targets_)) {
    throw CellError(FailurePhase::kDataOpen,
                    stored + ": loss " + target_spec_.loss +
                        " (cross entropy) needs integer class ids; store the labels as "
                        "integers (h5py: labels.astype('int64')), or set loss to mse, l1, "
                        "smooth_l1 or bce_with_logits to train against float targets "
                        "(docs/own-model.md#losses)");
  }
  const auto& expected = target_spec_.shape;
  if (!expected || *expected == target_shape_) return;
  if (values) {
    throw CellError(FailurePhase::kDataOpen,
                    stored + ": loss " + target_spec_.loss + " needs rows of the model output's " +
                        "shape " + shape_text(*expected) + "; store targets " +
                        shape_text(*expected).insert(1, expected->empty() ? "rows" : "rows, ") +
                        ", or change num_classes or the loss (docs/own-model.md#losses)");
  }
  throw CellError(FailurePhase::kDataOpen,
                  what + " has rows of shape " + shape_text(target_shape_) + ", the model needs " +
                      shape_text(*expected) +
                      (expected->empty() ? " (class ids: a 1-D dataset of integers)"
                                         : " (one label per voxel of the input)"));
}

void Hdf5Batches::read_rows(hid_t dataset, hid_t memory_type, int64_t first, int64_t count,
                            int64_t row_elements, void* out) const {
  const auto file_space = own_dataspace(HDF5_CHECK(H5Dget_space(dataset)));
  const int rank = HDF5_CHECK(H5Sget_simple_extent_ndims(file_space));
  std::vector<hsize_t> start(static_cast<size_t>(rank), 0);
  std::vector<hsize_t> extent(static_cast<size_t>(rank));
  HDF5_CHECK(H5Sget_simple_extent_dims(file_space, extent.data(), nullptr));
  start[0] = static_cast<hsize_t>(first);
  extent[0] = static_cast<hsize_t>(count);
  HDF5_CHECK(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, extent.data(),
                                 nullptr));
  const hsize_t memory_elements = static_cast<hsize_t>(count) * static_cast<hsize_t>(row_elements);
  const auto memory_space =
      own_dataspace(HDF5_CHECK(H5Screate_simple(1, &memory_elements, nullptr)));
  HDF5_CHECK(H5Dread(dataset, memory_type, memory_space, file_space, H5P_DEFAULT, out));
}

HostBatch Hdf5Batches::make_batch(SampleRange range) const {
  const bool with_targets = target_spec_.used;
  const bool values = target_spec_.is_float();
  HostBatch batch{allocate_rows(range.count, input_shape_, input_dtype_, pin_memory_), {}};
  if (with_targets) {
    batch.targets = allocate_rows(range.count, target_shape_,
                                  values ? torch::kFloat32 : torch::kInt64, pin_memory_);
  }
  const int64_t input_row = elements(input_shape_);
  const int64_t target_row = elements(target_shape_);
  as_cell_error(FailurePhase::kData, "reading " + path_, [&] {
    // Row i mod rows_: a range that passes the end continues at row 0.
    int64_t done = 0;
    while (done < range.count) {
      const int64_t row = (range.first + done) % rows_;
      const int64_t run = std::min(range.count - done, rows_ - row);
      read_rows(inputs_, memory_type_of(input_dtype_), row, run, input_row,
                static_cast<char*>(batch.inputs.data_ptr()) +
                    done * input_row * batch.inputs.element_size());
      if (with_targets) {
        read_rows(targets_, values ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT64, row, run, target_row,
                  static_cast<char*>(batch.targets.data_ptr()) +
                      done * target_row * batch.targets.element_size());
      }
      done += run;
    }
    return 0;
  });
  if (with_targets) check_target_values(batch.targets, range.first);
  return batch;
}

void Hdf5Batches::check_target_values(const torch::Tensor& targets, int64_t first) const {
  if (targets.numel() == 0) return;
  const std::string rows = " rows " + std::to_string(first % rows_) + "..";
  switch (target_spec_.kind) {
    case TargetSpec::Kind::kClassIds: {
      const int64_t low = targets.min().item<int64_t>();
      const int64_t high = targets.max().item<int64_t>();
      if (low < 0 || high >= target_spec_.num_classes) {
        throw CellError(
            FailurePhase::kData,
            "targets of " + path_ + rows + " hold label " + std::to_string(low < 0 ? low : high) +
                ", outside [0, num_classes=" + std::to_string(target_spec_.num_classes) +
                "): set num_classes to the number of classes of the data");
      }
      return;
    }
    case TargetSpec::Kind::kUnitValues: {
      const double low = targets.min().item<double>();
      const double high = targets.max().item<double>();
      if (!(low >= 0.0 && high <= 1.0)) {  // NaN fails too
        throw CellError(FailurePhase::kData,
                        "targets of " + path_ + rows + " hold " +
                            std::to_string(low < 0.0 ? low : high) +
                            ", outside [0, 1]: loss bce_with_logits needs probabilities "
                            "(multi-label or soft masks); use mse, l1 or smooth_l1 for other "
                            "values");
      }
      return;
    }
    case TargetSpec::Kind::kValues:
      return;
  }
}

std::map<std::string, double> Hdf5Batches::metrics() const {
  return {{"data_open_s", open_s_}, {"data_rows", static_cast<double>(rows_)}};
}

}  // namespace scalebench
