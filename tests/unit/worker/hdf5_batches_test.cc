// Batches from HDF5 files written here with the HDF5 C API: row contents and dtype
// conversion, wrap-around, the open-time checks and the per-batch label check.
#include "worker/hdf5_batches.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "common/base/error.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "worker/batch_source.h"
#include "worker/model_zoo.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;

/// A fresh directory per test, removed afterwards.
class Hdf5BatchesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("scalebench_hdf5_batches_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    silence_hdf5_error_printing();
  }
  void TearDown() override { fs::remove_all(dir_); }

  [[nodiscard]] Hdf5Handle create_file(const fs::path& path) const {
    fs::create_directories(path.parent_path());
    return own_file(HDF5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
  }

  fs::path dir_;
};

/// Writes dataset `name` of shape `dims` and file type `file_type` from `data` (memory
/// type `memory_type`, row-major).
void write_dataset(hid_t file, const std::string& name, const std::vector<hsize_t>& dims,
                   hid_t file_type, hid_t memory_type, const void* data) {
  const auto space = own_dataspace(
      HDF5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  const auto dataset = own_dataset(HDF5_CHECK(
      H5Dcreate2(file, name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  HDF5_CHECK(H5Dwrite(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
}

/// Row r, element e of the test inputs: 10 r + e.
std::vector<double> row_major_values(int64_t rows, int64_t row_elements) {
  std::vector<double> values(static_cast<size_t>(rows * row_elements));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t e = 0; e < row_elements; ++e) values[r * row_elements + e] = 10.0 * r + e;
  }
  return values;
}

/// The expected float32 batch of rows `rows` with per-row shape {2, 3}.
torch::Tensor expected_rows(const std::vector<int64_t>& rows) {
  std::vector<torch::Tensor> parts;
  for (const int64_t r : rows) parts.push_back(torch::arange(6, torch::kFloat32) + 10.0F * r);
  return torch::stack(parts).reshape({static_cast<int64_t>(rows.size()), 2, 3});
}

template <typename Body>
void expect_cell_error(const std::string& phase, const std::vector<std::string>& needles,
                       Body&& body) {
  try {
    body();
    FAIL() << "expected CellError(" << phase << ")";
  } catch (const CellError& error) {
    EXPECT_EQ(to_string(error.phase()), phase) << error.what();
    for (const auto& needle : needles) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos)
          << "'" << needle << "' not in: " << error.what();
    }
  }
}

/// Class-id targets of per-row shape `shape` (nullopt: any) in [0, classes).
TargetSpec class_ids(std::optional<std::vector<int64_t>> shape, int64_t classes) {
  return {.shape = std::move(shape), .num_classes = classes};
}

/// Float targets (`kind`) of per-row shape `shape` for loss `loss`.
TargetSpec float_values(std::vector<int64_t> shape, const std::string& loss = "mse") {
  return {
      .kind = loss == "bce_with_logits" ? TargetSpec::Kind::kUnitValues : TargetSpec::Kind::kValues,
      .shape = std::move(shape),
      .loss = loss};
}

Hdf5Batches open_standard(const fs::path& path, int64_t classes = 5,
                          std::vector<int64_t> input_shape = {2, 3}) {
  return {path,
          "inputs",
          "targets",
          std::move(input_shape),
          torch::kFloat32,
          class_ids(std::vector<int64_t>{}, classes),
          /*pin_memory=*/false};
}

/// inputs [5, 2, 3] of `input_file_type` (10 r + e), targets int32 [5] = r % classes.
void write_inputs_and_targets(const Hdf5Handle& file, hid_t input_file_type, int classes) {
  const auto values = row_major_values(5, 6);
  write_dataset(file, "inputs", {5, 2, 3}, input_file_type, H5T_NATIVE_DOUBLE, values.data());
  std::vector<int32_t> targets(5);
  for (int r = 0; r < 5; ++r) targets[r] = r % classes;
  write_dataset(file, "targets", {5}, H5T_STD_I32LE, H5T_NATIVE_INT32, targets.data());
}

TEST_F(Hdf5BatchesTest, ReadsRowsOfFloat64AndUint8AndFloat32Inputs) {
  for (const hid_t file_type : {H5T_IEEE_F64LE, H5T_STD_U8LE, H5T_IEEE_F32BE}) {
    SCOPED_TRACE(file_type == H5T_IEEE_F64LE ? "float64"
                 : file_type == H5T_STD_U8LE ? "uint8"
                                             : "float32");
    const auto path = dir_ / "data.h5";
    {
      auto file = create_file(path);
      write_inputs_and_targets(file, file_type, 5);
    }
    const Hdf5Batches batches = open_standard(path);
    EXPECT_EQ(batches.rows(), 5);
    const HostBatch batch = batches.make_batch({1, 3});
    EXPECT_EQ(batch.inputs.scalar_type(), torch::kFloat32);
    EXPECT_EQ(batch.targets.scalar_type(), torch::kInt64);
    EXPECT_FALSE(batch.inputs.is_pinned());
    EXPECT_FALSE(batch.targets.is_pinned());
    EXPECT_TRUE(torch::equal(batch.inputs, expected_rows({1, 2, 3}))) << batch.inputs;
    EXPECT_TRUE(torch::equal(batch.targets, torch::tensor({1, 2, 3}, torch::kInt64)));
  }
}

TEST_F(Hdf5BatchesTest, ARangePastTheEndWrapsToRowZero) {
  const auto path = dir_ / "data.h5";
  {
    auto file = create_file(path);
    write_inputs_and_targets(file, H5T_IEEE_F32LE, 5);
  }
  const Hdf5Batches batches = open_standard(path);
  const HostBatch wrapped = batches.make_batch({3, 4});
  EXPECT_TRUE(torch::equal(wrapped.inputs, expected_rows({3, 4, 0, 1}))) << wrapped.inputs;
  EXPECT_TRUE(torch::equal(wrapped.targets, torch::tensor({3, 4, 0, 1}, torch::kInt64)));
  // Later epochs: global index i is row i mod rows, also across two wraps.
  const HostBatch later = batches.make_batch({12, 7});
  EXPECT_TRUE(torch::equal(later.inputs, expected_rows({2, 3, 4, 0, 1, 2, 3})));
  EXPECT_TRUE(torch::equal(later.targets, torch::tensor({2, 3, 4, 0, 1, 2, 3}, torch::kInt64)));
  const HostBatch empty = batches.make_batch({2, 0});
  EXPECT_EQ(empty.inputs.sizes(), (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(empty.targets.numel(), 0);
}

TEST_F(Hdf5BatchesTest, TokenInputsAndVoxelTargetsConvertToInt64) {
  const auto path = dir_ / "tokens.h5";
  {
    auto file = create_file(path);
    std::vector<int32_t> tokens(3 * 4);
    std::iota(tokens.begin(), tokens.end(), 100);
    write_dataset(file, "ids", {3, 4}, H5T_STD_I32LE, H5T_NATIVE_INT32, tokens.data());
    std::vector<int64_t> labels(3 * 2 * 2);
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>(i % 3);
    write_dataset(file, "voxels", {3, 2, 2}, H5T_STD_I64LE, H5T_NATIVE_INT64, labels.data());
  }
  const Hdf5Batches batches(path, "ids", "voxels", {4}, torch::kInt64,
                            class_ids(std::vector<int64_t>{2, 2}, 3), false);
  const HostBatch batch = batches.make_batch({2, 2});
  EXPECT_EQ(batch.inputs.scalar_type(), torch::kInt64);
  EXPECT_TRUE(torch::equal(
      batch.inputs, torch::tensor({{108, 109, 110, 111}, {100, 101, 102, 103}}, torch::kInt64)))
      << batch.inputs;
  EXPECT_TRUE(torch::equal(batch.targets,
                           torch::tensor({{{2, 0}, {1, 2}}, {{0, 1}, {2, 0}}}, torch::kInt64)))
      << batch.targets;
}

TEST_F(Hdf5BatchesTest, MetricsCountRowsAndOpenTime) {
  const auto path = dir_ / "data.h5";
  {
    auto file = create_file(path);
    write_inputs_and_targets(file, H5T_IEEE_F32LE, 5);
  }
  const auto metrics = open_standard(path).metrics();
  ASSERT_TRUE(metrics.contains("data_rows"));
  ASSERT_TRUE(metrics.contains("data_open_s"));
  EXPECT_EQ(metrics.at("data_rows"), 5.0);
  EXPECT_GE(metrics.at("data_open_s"), 0.0);
  EXPECT_LT(metrics.at("data_open_s"), 60.0);
}

TEST_F(Hdf5BatchesTest, MissingFileOrDatasetFailsAtOpen) {
  expect_cell_error("data_open", {(dir_ / "absent.h5").string(), "missing"},
                    [&] { open_standard(dir_ / "absent.h5"); });
  const auto not_hdf5 = dir_ / "text.h5";
  std::ofstream(not_hdf5) << "hello";
  expect_cell_error("data_open", {not_hdf5.string()}, [&] { open_standard(not_hdf5); });

  const auto path = dir_ / "data.h5";
  {
    auto file = create_file(path);
    write_inputs_and_targets(file, H5T_IEEE_F32LE, 5);
  }
  expect_cell_error("data_open", {"'images'", path.string(), "data.inputs"}, [&] {
    Hdf5Batches(path, "images", "targets", {2, 3}, torch::kFloat32,
                class_ids(std::vector<int64_t>{}, 5), false);
  });
  expect_cell_error("data_open", {"'group/labels'"}, [&] {
    Hdf5Batches(path, "inputs", "group/labels", {2, 3}, torch::kFloat32,
                class_ids(std::vector<int64_t>{}, 5), false);
  });
}

TEST_F(Hdf5BatchesTest, WrongRowShapeNamesTheShapeAndTheFix) {
  const auto path = dir_ / "data.h5";
  {
    auto file = create_file(path);
    write_inputs_and_targets(file, H5T_IEEE_F32LE, 5);
  }
  expect_cell_error("data_open",
                    {"'inputs'", "rows of shape [2, 3]", "input_shape is [3, 2]",
                     "set the experiment's input_shape to [2, 3]"},
                    [&] {
                      open_standard(path, 5, {3, 2});
                    });
  expect_cell_error("data_open", {"[6]", "[2, 3]"}, [&] { open_standard(path, 5, {6}); });
}

TEST_F(Hdf5BatchesTest, TargetsNeedOneRowPerInputRow) {
  const auto path = dir_ / "data.h5";
  {
    auto file = create_file(path);
    const auto values = row_major_values(5, 6);
    write_dataset(file, "inputs", {5, 2, 3}, H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, values.data());
    const std::vector<int64_t> targets = {0, 1, 2, 3};
    write_dataset(file, "targets", {4}, H5T_STD_I64LE, H5T_NATIVE_INT64, targets.data());
  }
  expect_cell_error("data_open", {"'targets'", "4 rows", "the inputs have 5"},
                    [&] { open_standard(path); });
}

TEST_F(Hdf5BatchesTest, StringDatasetsAreRefused) {
  const auto path = dir_ / "data.h5";
  {
    auto file = create_file(path);
    const auto values = row_major_values(2, 6);
    write_dataset(file, "inputs", {2, 2, 3}, H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, values.data());
    h5::write_string_dataset(file, "targets", {"cat", "dog"});
  }
  expect_cell_error("data_open", {"'targets'", "not an integer or floating-point"},
                    [&] { open_standard(path); });
}

TEST_F(Hdf5BatchesTest, VoxelTargetsMustMatchTheZooModel) {
  const auto path = dir_ / "volumes.h5";
  {
    auto file = create_file(path);
    const std::vector<float> volumes(2 * 1 * 4 * 4 * 4, 0.5F);
    write_dataset(file, "inputs", {2, 1, 4, 4, 4}, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
                  volumes.data());
    const std::vector<int64_t> labels(2 * 4 * 4 * 2, 1);
    write_dataset(file, "targets", {2, 4, 4, 2}, H5T_STD_I64LE, H5T_NATIVE_INT64, labels.data());
  }
  expect_cell_error("data_open", {"rows of shape [4, 4, 2]", "needs [4, 4, 4]", "per voxel"}, [&] {
    Hdf5Batches(path, "inputs", "targets", {1, 4, 4, 4}, torch::kFloat32,
                class_ids(std::vector<int64_t>{4, 4, 4}, 2), false);
  });
  // Class ids expected, voxel labels stored.
  expect_cell_error("data_open", {"needs []", "class ids"}, [&] {
    Hdf5Batches(path, "inputs", "targets", {1, 4, 4, 4}, torch::kFloat32,
                class_ids(std::vector<int64_t>{}, 2), false);
  });
  // No expectation (TorchScript): the file's shape is taken.
  const Hdf5Batches any(path, "inputs", "targets", {1, 4, 4, 4}, torch::kFloat32,
                        class_ids(std::nullopt, 2), false);
  EXPECT_EQ(any.make_batch({0, 2}).targets.sizes(), (std::vector<int64_t>{2, 4, 4, 2}));
}

TEST_F(Hdf5BatchesTest, ALabelOutsideTheClassesFailsTheBatch) {
  const auto path = dir_ / "data.h5";
  {
    auto file = create_file(path);
    write_inputs_and_targets(file, H5T_IEEE_F32LE, 5);  // labels 0..4
  }
  const Hdf5Batches batches = open_standard(path, /*classes=*/4);
  EXPECT_NO_THROW((void)batches.make_batch({0, 4}));  // labels 0..3
  expect_cell_error("data", {path.string(), "label 4", "num_classes=4"}, [&] {
    (void)batches.make_batch({2, 3});
  });

  const auto negative = dir_ / "negative.h5";
  {
    auto file = create_file(negative);
    const auto values = row_major_values(2, 6);
    write_dataset(file, "inputs", {2, 2, 3}, H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, values.data());
    const std::vector<int64_t> targets = {0, -1};
    write_dataset(file, "targets", {2}, H5T_STD_I64LE, H5T_NATIVE_INT64, targets.data());
  }
  expect_cell_error("data", {"label -1"}, [&] {
    (void)open_standard(negative).make_batch({0, 2});
  });
}

TEST_F(Hdf5BatchesTest, MakeBatchSourceResolvesRelativePathsAgainstTheTree) {
  const auto path = dir_ / "data" / "train.h5";
  {
    auto file = create_file(path);
    write_inputs_and_targets(file, H5T_IEEE_F64LE, 5);
  }
  CellSpec cell;
  cell.model.zoo = "mlp";
  cell.data = {"hdf5", "data/../data/train.h5", "inputs", "targets"};
  const ModelInfo& mlp = find_model("mlp");
  const TargetSpec classes = class_ids(std::vector<int64_t>{}, 5);
  const auto source = make_batch_source(cell, mlp, {2, 3}, classes, dir_.string(), false);
  ASSERT_NE(dynamic_cast<Hdf5Batches*>(source.get()), nullptr);
  EXPECT_EQ(source->metrics().at("data_rows"), 5.0);
  EXPECT_TRUE(torch::equal(source->make_batch({4, 2}).inputs, expected_rows({4, 0})));

  // An absolute path ignores the tree.
  cell.data.path = path.string();
  EXPECT_NO_THROW(make_batch_source(cell, mlp, {2, 3}, classes, "/nonexistent-tree", false));
  // Relative to another tree: missing.
  cell.data.path = "data/train.h5";
  expect_cell_error("data_open", {"/nonexistent-tree/data/train.h5"}, [&] {
    make_batch_source(cell, mlp, {2, 3}, classes, "/nonexistent-tree", false);
  });
  cell.data.kind = "parquet";
  expect_cell_error("data_open", {"parquet"}, [&] {
    make_batch_source(cell, mlp, {2, 3}, classes, dir_.string(), false);
  });
  cell.data.kind = "synthetic";
  EXPECT_TRUE(
      make_batch_source(cell, mlp, {2, 3}, classes, dir_.string(), false)->metrics().empty());
}

/// inputs [5, 2, 3] float32 and, unless `targets_type` is 0, targets [5, row...] of
/// `targets_type` holding `values` (row-major).
fs::path write_float_targets(const fs::path& path, hid_t targets_type,
                             const std::vector<hsize_t>& targets_dims,
                             const std::vector<double>& values) {
  auto file =
      own_file(HDF5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
  const auto inputs = row_major_values(5, 6);
  write_dataset(file, "inputs", {5, 2, 3}, H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, inputs.data());
  if (targets_type != 0) {
    write_dataset(file, "targets", targets_dims, targets_type, H5T_NATIVE_DOUBLE, values.data());
  }
  return path;
}

TEST_F(Hdf5BatchesTest, FloatTargetsOfAFloatLossReadAsFloat32) {
  const auto values = row_major_values(5, 3);  // 10 r + e
  for (const hid_t file_type : {H5T_IEEE_F64LE, H5T_IEEE_F32LE, H5T_STD_I16LE}) {
    const auto path = write_float_targets(dir_ / "regression.h5", file_type, {5, 3}, values);
    const Hdf5Batches batches(path, "inputs", "targets", {2, 3}, torch::kFloat32, float_values({3}),
                              false);
    const HostBatch batch = batches.make_batch({4, 2});  // rows 4, 0
    EXPECT_EQ(batch.targets.scalar_type(), torch::kFloat32);
    EXPECT_TRUE(
        torch::equal(batch.targets, torch::tensor({{40.0F, 41.0F, 42.0F}, {0.0F, 1.0F, 2.0F}})))
        << batch.targets;
  }
}

TEST_F(Hdf5BatchesTest, FloatTargetsOfAnotherShapeNameDatasetDtypeShapeAndFix) {
  const auto path =
      write_float_targets(dir_ / "regression.h5", H5T_IEEE_F32LE, {5, 4}, row_major_values(5, 4));
  expect_cell_error(
      "data_open",
      {"'targets'", path.string(), "float32 [5, 4]", "loss mse", "output's shape [3]",
       "store targets [rows, 3]", "num_classes"},
      [&] {
        Hdf5Batches(path, "inputs", "targets", {2, 3}, torch::kFloat32, float_values({3}), false);
      });
}

TEST_F(Hdf5BatchesTest, CrossEntropyRefusesFloatTargets) {
  const auto path =
      write_float_targets(dir_ / "soft.h5", H5T_IEEE_F64LE, {5}, {0.0, 1.0, 0.5, 1.0, 0.0});
  expect_cell_error(
      "data_open",
      {"'targets'", "float64 [5]", "integer class ids", "astype('int64')", "bce_with_logits"},
      [&] { open_standard(path); });
}

TEST_F(Hdf5BatchesTest, BceTargetsOutsideTheUnitIntervalFailTheBatch) {
  const auto path =
      write_float_targets(dir_ / "masks.h5", H5T_IEEE_F32LE, {5, 1}, {0.0, 1.0, 0.25, 2.0, 0.5});
  const Hdf5Batches batches(path, "inputs", "targets", {2, 3}, torch::kFloat32,
                            float_values({1}, "bce_with_logits"), false);
  EXPECT_NO_THROW((void)batches.make_batch({0, 3}));
  expect_cell_error("data", {path.string(), "outside [0, 1]", "bce_with_logits"}, [&] {
    (void)batches.make_batch({2, 3});
  });
  // Other float losses take any value.
  EXPECT_NO_THROW((void)Hdf5Batches(path, "inputs", "targets", {2, 3}, torch::kFloat32,
                                    float_values({1}), false)
                      .make_batch({0, 5}));
}

TEST_F(Hdf5BatchesTest, InferenceNeedsNoTargetsTrainingNamesTheMatrixLine) {
  const auto path = write_float_targets(dir_ / "images.h5", 0, {}, {});
  CellSpec cell;
  cell.model.zoo = "mlp";
  cell.mode = Mode::kInfer;
  cell.data = {"hdf5", "images.h5", "inputs", "targets"};
  cell.source = "matrix.yaml:12";
  const ModelInfo& mlp = find_model("mlp");
  const auto inference = make_batch_source(
      cell, mlp, {2, 3}, cell_targets(cell, mlp, {2, 3}, 5, {}), dir_.string(), false);
  const HostBatch batch = inference->make_batch({3, 4});
  EXPECT_TRUE(torch::equal(batch.inputs, expected_rows({3, 4, 0, 1})));
  EXPECT_FALSE(batch.targets.defined());

  cell.mode = Mode::kTrain;
  expect_cell_error("data_open",
                    {path.string(), "no dataset 'targets'", "training with loss auto",
                     "integer class ids", "data.targets", "mode infer", "matrix.yaml:12"},
                    [&] {
                      make_batch_source(cell, mlp, {2, 3}, cell_targets(cell, mlp, {2, 3}, 5, {}),
                                        dir_.string(), false);
                    });
  cell.loss = "mse";
  expect_cell_error("data_open", {"training with loss mse", "float targets", "[10]"}, [&] {
    make_batch_source(cell, mlp, {2, 3}, cell_targets(cell, mlp, {2, 3}, 10, {10}), dir_.string(),
                      false);
  });
}

}  // namespace
}  // namespace scalebench
