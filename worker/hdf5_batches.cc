#include "worker/hdf5_batches.h"

#include <hdf5.h>

#include <functional>

#include "common/base/error.h"

namespace scalebench {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

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
                         torch::ScalarType input_dtype,
                         std::optional<std::vector<int64_t>> expected_target_shape,
                         int64_t num_classes, bool pin_memory)
    : path_(path.string()),
      input_shape_(std::move(input_shape)),
      input_dtype_(input_dtype),
      num_classes_(num_classes),
      pin_memory_(pin_memory) {
  const auto start = std::chrono::steady_clock::now();
  silence_hdf5_error_printing();
  if (H5Fis_hdf5(path_.c_str()) <= 0) {
    throw CellError(FailurePhase::kDataOpen,
                    "data file " + path_ +
                        " is missing or not an HDF5 file: write it with h5py "
                        "(datasets '" +
                        inputs_dataset + "' and '" + targets_dataset + "')");
  }
  file_ = as_cell_error(FailurePhase::kDataOpen, "cannot open data file " + path_, [&] {
    return own_file(HDF5_CHECK(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  });
  auto open = [&](const std::string& name) {
    if (H5Lexists(file_, name.c_str(), H5P_DEFAULT) <= 0) {
      throw CellError(FailurePhase::kDataOpen,
                      "data file " + path_ + " has no dataset '" + name +
                          "': set data.inputs / data.targets to the datasets' "
                          "names (h5ls -r " +
                          path_ + " lists them)");
    }
    return as_cell_error(
        FailurePhase::kDataOpen, "cannot open dataset '" + name + "' of " + path_,
        [&] { return own_dataset(HDF5_CHECK(H5Dopen2(file_, name.c_str(), H5P_DEFAULT))); });
  };
  inputs_ = open(inputs_dataset);
  targets_ = open(targets_dataset);
  const std::string inputs_what = "dataset '" + inputs_dataset + "' of " + path_;
  const std::string targets_what = "dataset '" + targets_dataset + "' of " + path_;
  const auto input_dims = numeric_dims(inputs_, inputs_what);
  const auto target_dims = numeric_dims(targets_, targets_what);
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
  if (target_dims.empty() || target_dims[0] != rows_) {
    throw CellError(FailurePhase::kDataOpen,
                    targets_what + " has " +
                        (target_dims.empty() ? std::string("no dimensions")
                                             : std::to_string(target_dims[0]) + " rows") +
                        ", the inputs have " + std::to_string(rows_) +
                        ": store one target per input row");
  }
  target_shape_.assign(target_dims.begin() + 1, target_dims.end());
  if (expected_target_shape && *expected_target_shape != target_shape_) {
    throw CellError(FailurePhase::kDataOpen,
                    targets_what + " has rows of shape " + shape_text(target_shape_) +
                        ", the model needs " + shape_text(*expected_target_shape) +
                        (expected_target_shape->empty() ? " (class ids: a 1-D dataset of integers)"
                                                        : " (one label per voxel of the input)"));
  }
  open_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
  HostBatch batch =
      allocate_host_batch(range.count, input_shape_, input_dtype_, target_shape_, pin_memory_);
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
      read_rows(targets_, H5T_NATIVE_INT64, row, run, target_row,
                batch.targets.data_ptr<int64_t>() + done * target_row);
      done += run;
    }
    return 0;
  });
  if (batch.targets.numel() > 0) {
    const int64_t low = batch.targets.min().item<int64_t>();
    const int64_t high = batch.targets.max().item<int64_t>();
    if (low < 0 || high >= num_classes_) {
      throw CellError(FailurePhase::kData,
                      "targets of " + path_ + " rows " + std::to_string(range.first % rows_) +
                          ".. hold label " + std::to_string(low < 0 ? low : high) +
                          ", outside [0, num_classes=" + std::to_string(num_classes_) +
                          "): set num_classes to the number of classes of the data");
    }
  }
  return batch;
}

std::map<std::string, double> Hdf5Batches::metrics() const {
  return {{"data_open_s", open_s_}, {"data_rows", static_cast<double>(rows_)}};
}

}  // namespace scalebench
