// Expansion of valid matrices: counts, excludes, overrides, defaults, ids, CSV mapping.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <string>

#include "common/base/build_info.h"
#include "common/base/diagnostics.h"
#include "common/base/error.h"
#include "common/cell/zoo_names.h"
#include "matrix/csv.h"
#include "matrix/matrix.h"

namespace scalebench {
namespace {

const std::filesystem::path kExamples = scalebench::build_info::source_dir() / "docs" / "examples";

size_t count_if_cells(const ExpandedMatrix& m, const std::function<bool(const CellSpec&)>& pred) {
  return static_cast<size_t>(std::count_if(m.cells.begin(), m.cells.end(), pred));
}

const std::string kBase =
    "sweep:\n"
    "  batch_sizes: [8, 16]\n"
    "  world_sizes: [1, 2]\n"
    "  modes: [train, infer]\n"
    "experiments:\n"
    "  - name: a\n"
    "    model: mlp\n"
    "  - name: b\n"
    "    model: resnet18\n"
    "    input_shape: [3, 32, 32]\n"
    "    num_classes: 10\n";

TEST(MatrixExpandTest, CrossProductCount) {
  const auto m = load_matrix_text("m.yaml", kBase);
  EXPECT_EQ(m.cells.size(), 2U * 2U * 2U * 2U);
  EXPECT_EQ(m.format, "yaml");
  EXPECT_EQ(m.name, "m");
  EXPECT_EQ(m.scheduling, "exclusive");
  EXPECT_TRUE(m.repo.empty());
  EXPECT_TRUE(m.branches.empty());
  for (const auto& cell : m.cells) {
    EXPECT_EQ(cell.cell_id, compute_cell_id(cell));
    EXPECT_EQ(cell.branch, "");
  }
}

TEST(MatrixExpandTest, BranchesMultiplyCells) {
  const auto m = load_matrix_text("m.yaml", kBase + "repo: .\nbranches: [main, dev]\n");
  EXPECT_EQ(m.cells.size(), 32U);
  EXPECT_EQ(m.branches, (std::vector<std::string>{"main", "dev"}));
  EXPECT_EQ(count_if_cells(m, [](const CellSpec& c) { return c.branch == "dev"; }), 16U);
}

TEST(MatrixExpandTest, ExcludeRemovesMatchingCellsOnly) {
  const auto m = load_matrix_text(
      "m.yaml",
      kBase + "exclude:\n  - {experiment: b, world_size: 2}\n  - {mode: infer, batch_size: 16}\n");
  // b/w2: 4 cells; infer/b16: 4 cells (a w1, a w2, b w1, b w2), overlap b/w2/infer/b16: 1.
  EXPECT_EQ(m.cells.size(), 16U - 4U - 4U + 1U);
  EXPECT_EQ(
      count_if_cells(m, [](const CellSpec& c) { return c.experiment == "b" && c.world_size == 2; }),
      0U);
  EXPECT_TRUE(m.warnings.empty());
}

TEST(MatrixExpandTest, ExcludeMatchingNothingIsAWarning) {
  const auto m = load_matrix_text("m.yaml", kBase + "exclude:\n  - {experiment: zzz}\n");
  EXPECT_EQ(m.cells.size(), 16U);
  ASSERT_EQ(m.warnings.size(), 1U);
  EXPECT_NE(m.warnings[0].find("m.yaml:13:"), std::string::npos) << m.warnings[0];
  EXPECT_NE(m.warnings[0].find("matches no cell"), std::string::npos);
}

TEST(MatrixExpandTest, TorchScriptWithShortWarmupIsAWarning) {
  const std::string head =
      "sweep: {batch_sizes: [4]}\n"
      "experiments:\n"
      "  - name: own\n"
      "    model: {torchscript: build/model.pt}\n"
      "    input_shape: [16]\n"
      "    num_classes: 3\n";
  const auto short_warmup = load_matrix_text("m.yaml", head + "    warmup: 1\n");
  ASSERT_EQ(short_warmup.warnings.size(), 1U);
  EXPECT_NE(short_warmup.warnings[0].find("m.yaml:3:"), std::string::npos)
      << short_warmup.warnings[0];
  EXPECT_NE(short_warmup.warnings[0].find("set warmup: 3"), std::string::npos);
  EXPECT_TRUE(load_matrix_text("m.yaml", head + "    warmup: 3\n").warnings.empty());
  // Zoo models are built eagerly: no warning at any warmup.
  EXPECT_TRUE(load_matrix_text("m.yaml", kBase + "defaults: {warmup: 0}\n").warnings.empty());
}

// Note [TorchScript num_classes]: only training with class targets needs it (issue 38: a
// regression model trained with loss: mse on float HDF5 targets, and inference of a file
// without targets, were refused for lacking it).
TEST(MatrixExpandTest, TorchScriptNeedsNumClassesOnlyForClassTargets) {
  const std::string head =
      "sweep: {batch_sizes: [4]}\n"
      "experiments:\n"
      "  - name: own\n"
      "    model: {torchscript: build/model.pt}\n"
      "    input_shape: [16]\n"
      "    warmup: 3\n";
  const std::string regression =
      "    modes: [train]\n"
      "    loss: [mse, l1, smooth_l1, bce_with_logits]\n"
      "    data: {hdf5: build/data.h5, inputs: inputs, targets: targets}\n";
  const auto m = load_matrix_text("m.yaml", head + regression);
  ASSERT_EQ(m.cells.size(), 4U);
  std::set<std::string> ids;
  for (const auto& cell : m.cells) {
    EXPECT_EQ(cell.num_classes, 1) << "unused, as for an AOTInductor package";
    ids.insert(cell.cell_id);
  }
  // The same cells written with num_classes: 1 are the same cells.
  const auto written = load_matrix_text("m.yaml", head + "    num_classes: 1\n" + regression);
  std::set<std::string> written_ids;
  for (const auto& cell : written.cells) written_ids.insert(cell.cell_id);
  EXPECT_EQ(ids, written_ids);
  // Inference of a file without targets: no num_classes, no loss.
  const auto infer = load_matrix_text(
      "m.yaml", head + "    modes: [infer]\n    data: {hdf5: build/images.h5, inputs: images}\n");
  ASSERT_EQ(infer.cells.size(), 1U);
  EXPECT_EQ(infer.cells[0].num_classes, 1);
  // Training with class targets still needs it, and names the loss and the remedy.
  for (const std::string loss : {"auto", "cross_entropy"}) {
    SCOPED_TRACE(loss);
    try {
      load_matrix_text("m.yaml", head + "    loss: " + loss + "\n");
      FAIL() << "expected MatrixError";
    } catch (const MatrixError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("m.yaml:3:"), std::string::npos) << message;
      EXPECT_NE(message.find("(loss " + loss + ") needs num_classes"), std::string::npos)
          << message;
      EXPECT_NE(message.find("loss: mse"), std::string::npos) << message;
    }
  }
  // Given, it is kept.
  const auto classes = load_matrix_text("m.yaml", head + "    num_classes: 7\n");
  ASSERT_EQ(classes.cells.size(), 1U);
  EXPECT_EQ(classes.cells[0].num_classes, 7);
}

TEST(MatrixExpandTest, ExperimentOverridesAxesAndDefaults) {
  const auto m =
      load_matrix_text("m.yaml",
                       "defaults:\n  iterations: 7\n  device: cpu\n"
                       "sweep:\n  batch_sizes: [8, 16]\n"
                       "experiments:\n"
                       "  - model: mlp\n"
                       "  - model: transformer\n    batch_sizes: [4]\n    iterations: 3\n"
                       "    precisions: [bf16, fp32]\n    device: auto\n");
  EXPECT_EQ(m.cells.size(), 2U + 2U);
  for (const auto& cell : m.cells) {
    if (cell.experiment == "mlp") {
      EXPECT_EQ(cell.measured_iterations, 7);
      EXPECT_EQ(cell.device, Device::kCpu);
    } else {
      EXPECT_EQ(cell.experiment, "transformer");
      EXPECT_EQ(cell.batch_size, 4);
      EXPECT_EQ(cell.measured_iterations, 3);
      EXPECT_EQ(cell.device, Device::kAuto);
    }
  }
}

TEST(MatrixExpandTest, DefaultsComeFromCellSpecAndTheZoo) {
  const auto m =
      load_matrix_text("m.yaml", "sweep:\n  batch_sizes: [2]\nexperiments:\n  - model: unet3d\n");
  ASSERT_EQ(m.cells.size(), 1U);
  const CellSpec defaults;
  const auto& cell = m.cells[0];
  EXPECT_EQ(cell.warmup_iterations, defaults.warmup_iterations);
  EXPECT_EQ(cell.measured_iterations, defaults.measured_iterations);
  EXPECT_EQ(cell.seed, defaults.seed);
  EXPECT_EQ(cell.timeout_s, defaults.timeout_s);
  EXPECT_EQ(cell.world_size, 1);
  EXPECT_EQ(cell.precision, Precision::kFp32);
  EXPECT_EQ(cell.mode, Mode::kTrain);
  EXPECT_EQ(cell.input_shape, find_zoo_model("unet3d")->default_shape);
  EXPECT_EQ(cell.num_classes, 2);
  EXPECT_EQ(cell.experiment, "unet3d");
  EXPECT_EQ(cell.source, "m.yaml:4");
}

TEST(MatrixExpandTest, EmptyShapeAndZeroClassesMeanModelDefault) {
  const auto m = load_matrix_text("m.yaml",
                                  "sweep:\n  batch_sizes: [2]\nexperiments:\n  - model: vit_b16\n  "
                                  "  input_shape: []\n    num_classes: 0\n");
  ASSERT_EQ(m.cells.size(), 1U);
  EXPECT_EQ(m.cells[0].input_shape, (std::vector<int64_t>{3, 224, 224}));
  EXPECT_EQ(m.cells[0].num_classes, 1000);
}

TEST(MatrixExpandTest, InferenceCellsIgnoreOptimizerAndTrainCellsIgnoreSamples) {
  const auto m =
      load_matrix_text("m.yaml",
                       "sweep:\n  batch_sizes: [2]\n  modes: [train, infer]\nexperiments:\n"
                       "  - model: mlp\n    samples: 64\n    checkpoint: w.pt\n"
                       "    optimizer: {name: adamw, lr: 0.001, weight_decay: 0.1}\n"
                       "    data: {hdf5: d.h5}\n");
  ASSERT_EQ(m.cells.size(), 2U);
  for (const auto& cell : m.cells) {
    EXPECT_EQ(cell.data.kind, "hdf5");
    EXPECT_EQ(cell.data.inputs, "inputs");
    if (cell.mode == Mode::kInfer) {
      EXPECT_EQ(cell.optimizer, OptimizerSpec{});
      EXPECT_EQ(cell.samples, 64);
      EXPECT_EQ(cell.checkpoint, "w.pt");
    } else {
      EXPECT_EQ(cell.optimizer.name, "adamw");
      EXPECT_DOUBLE_EQ(cell.optimizer.weight_decay, 0.1);
      EXPECT_EQ(cell.samples, 0);
      EXPECT_EQ(cell.checkpoint, "");
    }
  }
}

TEST(MatrixExpandTest, CellIdsAreStableAndChangeWithTheSpec) {
  const auto first = load_matrix_text("m.yaml", kBase);
  const auto second = load_matrix_text("other/place.yaml", kBase);
  ASSERT_EQ(first.cells.size(), second.cells.size());
  for (size_t i = 0; i < first.cells.size(); ++i)
    EXPECT_EQ(first.cells[i].cell_id, second.cells[i].cell_id);
  std::string changed = kBase;
  changed.replace(changed.find("[8, 16]"), 7, "[8, 32]");
  const auto third = load_matrix_text("m.yaml", changed);
  std::set<std::string> ids;
  for (const auto& cell : first.cells) ids.insert(cell.cell_id);
  EXPECT_EQ(ids.size(), first.cells.size());
  size_t kept = 0;
  for (const auto& cell : third.cells) {
    kept += ids.count(cell.cell_id);
    if (cell.batch_size == 32) {
      EXPECT_EQ(ids.count(cell.cell_id), 0U);
    }
  }
  EXPECT_EQ(kept, 8U);  // the batch-8 cells keep their ids
}

TEST(MatrixExpandTest, LossAutoKeepsTheIdsOfEarlierCellsAndInferenceIgnoresTheLoss) {
  const auto plain = load_matrix_text("m.yaml", kBase);
  const auto explicit_auto = load_matrix_text("m.yaml", "defaults: {loss: auto}\n" + kBase);
  const auto mse = load_matrix_text("m.yaml", "defaults: {loss: mse}\n" + kBase);
  ASSERT_EQ(plain.cells.size(), mse.cells.size());
  for (size_t i = 0; i < plain.cells.size(); ++i) {
    EXPECT_EQ(plain.cells[i].cell_id, explicit_auto.cells[i].cell_id);
    // Inference has no loss: the matrix resets it, so its cells keep their ids.
    const bool train = plain.cells[i].mode == Mode::kTrain;
    EXPECT_EQ(mse.cells[i].loss, train ? "mse" : "auto");
    EXPECT_EQ(plain.cells[i].cell_id == mse.cells[i].cell_id, !train);
  }
}

TEST(MatrixExpandTest, Hdf5DataWithoutTargetsDefaultsTheDatasetName) {
  // The worker opens it for training only (docs/own-model.md#losses).
  const auto m = load_matrix_text("m.yaml",
                                  "sweep: {modes: [infer], batch_sizes: [4]}\nexperiments:\n"
                                  "  - {model: mlp, data: {hdf5: data.h5, inputs: images}}\n");
  ASSERT_EQ(m.cells.size(), 1U);
  EXPECT_EQ(m.cells[0].data.inputs, "images");
  EXPECT_EQ(m.cells[0].data.targets, "targets");
}

TEST(MatrixExpandTest, MaxWorldSizeLimitIsApplied) {
  const std::string text =
      "sweep:\n  batch_sizes: [1]\n  world_sizes: [8]\nexperiments:\n  - model: mlp\n";
  EXPECT_NO_THROW(load_matrix_text("m.yaml", text));
  EXPECT_THROW(load_matrix_text("m.yaml", text, MatrixLimits{.max_world_size = 4}), MatrixError);
}

TEST(MatrixExpandTest, QuickstartExample) {
  const auto m = load_matrix(kExamples / "quickstart.yaml");
  EXPECT_EQ(m.cells.size(), 12U);
  EXPECT_LE(m.cells.size(), 16U);
  for (const auto& cell : m.cells) {
    EXPECT_EQ(cell.device, Device::kCpu);
    EXPECT_LE(cell.world_size, 2);
  }
  EXPECT_TRUE(m.warnings.empty());
}

TEST(MatrixExpandTest, CompileAxisExample) {
  const auto m = load_matrix(kExamples / "compile_axis.yaml");
  // mlp: 3 compile x 2 precisions x 2 world sizes; three models x 2 compile on one worker
  EXPECT_EQ(m.cells.size(), 12U + 3U * 2U);
  std::set<std::string> labels;
  for (const auto& cell : m.cells) {
    EXPECT_EQ(cell.mode, Mode::kInfer);
    EXPECT_TRUE(cell.validate);
    labels.insert(cell_label(cell));
  }
  EXPECT_TRUE(labels.count("-/mlp/infer/b32/w2/bf16/compile=aoti")) << *labels.begin();
  EXPECT_TRUE(labels.count("-/unet3d-16/infer/b2/w1/fp32/compile=eager"));
  EXPECT_TRUE(m.warnings.empty());
}

TEST(MatrixExpandTest, GpuSweepExample) {
  const auto m = load_matrix(kExamples / "gpu_sweep.yaml");
  EXPECT_EQ(m.branches.size(), 2U);
  // resnet50 3x4x2, vit 2x4x2 - (fp32, w8: 2 batches), unet3d 2 modes x 3x4x2; x 2 branches
  EXPECT_EQ(m.cells.size(), 2U * (24U + 16U - 2U + 48U));
}

TEST(MatrixCsvTest, TrainTaskFileMapsColumns) {
  const auto m = load_matrix(kExamples / "cytodl_train.csv");
  EXPECT_EQ(m.format, "cytodl-train-csv");
  EXPECT_EQ(m.repo, ".");
  EXPECT_EQ(m.branches, (std::vector<std::string>{"main", "claude/all-optimizations-combined"}));
  ASSERT_EQ(m.cells.size(), 4U);
  const auto& first = m.cells[0];
  EXPECT_EQ(first.branch, "main");
  EXPECT_EQ(first.experiment, "im2im/segmentation");
  EXPECT_EQ(first.model.zoo, "unet3d");
  EXPECT_EQ(first.device, Device::kCuda);
  EXPECT_EQ(first.measured_iterations, 5);
  EXPECT_EQ(first.batch_size, 8);
  EXPECT_EQ(first.world_size, 1);
  EXPECT_EQ(first.mode, Mode::kTrain);
  EXPECT_EQ(first.precision, Precision::kFp32);
  EXPECT_NE(first.source.find("cytodl_train.csv:3"), std::string::npos) << "after the comment";
  EXPECT_EQ(m.cells[1].experiment, "im2im/labelfree");  // the real config's name
  EXPECT_EQ(m.cells[1].model.zoo, "unet3d");
  const auto& last = m.cells[3];  // quoted, comma-separated overrides
  EXPECT_EQ(last.precision, Precision::kBf16);
  EXPECT_EQ(last.world_size, 2);
  EXPECT_EQ(last.seed, 1U);
}

TEST(MatrixCsvTest, CommentLinesAreSkippedAndQuotedHashesAreFields) {
  const std::string text =
      "# needs a CytoDL clone\n"
      "branch,experiment,trainer,max_epochs,batch_size,overrides\n"
      "# the baseline\n"
      "main,im2im/segmentation,cpu,2,4,\n"
      "\"#hash\",im2im/segmentation,cpu,2,4,\n";
  Diagnostics diagnostics;
  const auto records = parse_csv(text, "tasks.csv", diagnostics);
  EXPECT_FALSE(diagnostics.has_errors());
  ASSERT_EQ(records.size(), 3U);
  EXPECT_EQ(records[0].line, 2);
  EXPECT_EQ(records[1].line, 4);
  EXPECT_EQ(records[2].fields[0].value, "#hash");
}

TEST(MatrixCsvTest, InferenceTaskFileMapsColumns) {
  const auto m = load_matrix(kExamples / "cytodl_infer.csv");
  EXPECT_EQ(m.format, "cytodl-infer-csv");
  ASSERT_EQ(m.cells.size(), 2U);
  const auto& cell = m.cells[1];
  EXPECT_EQ(cell.mode, Mode::kInfer);
  EXPECT_EQ(cell.checkpoint, "checkpoints/segmentation.ckpt");
  EXPECT_EQ(cell.data.kind, "hdf5");
  EXPECT_EQ(cell.data.path, "data/test_cells.h5");
  EXPECT_EQ(cell.data.inputs, "raw");
  EXPECT_EQ(cell.data.targets, "seg");
  EXPECT_EQ(cell.precision, Precision::kFp16);
  EXPECT_EQ(cell.batch_size, 16);
}

TEST(MatrixCsvTest, QuotedFieldsWithCommasNewlinesAndEscapedQuotes) {
  const std::string text =
      "branch,experiment,trainer,max_epochs,batch_size,overrides\r\n"
      "\"feature,x\",mlp,cpu,3,4,\"seed=5\n trainer.devices=2\"\r\n"
      "\"feat/q\",transformer,cpu,3,4,\"scalebench.warmup=0\"\r\n";
  const auto m = load_matrix_text("t.csv", text);
  ASSERT_EQ(m.cells.size(), 2U);
  EXPECT_EQ(m.cells[0].branch, "feature,x");
  EXPECT_EQ(m.cells[0].seed, 5U);
  EXPECT_EQ(m.cells[0].world_size, 2);
  EXPECT_EQ(m.cells[0].device, Device::kCpu);
  EXPECT_EQ(m.cells[1].branch, "feat/q");
  EXPECT_EQ(m.cells[1].warmup_iterations, 0);
  EXPECT_NE(m.cells[1].source.find("t.csv:4"), std::string::npos) << m.cells[1].source;
}

TEST(MatrixCsvTest, EscapedQuotesAreUnescapedAndRefusedInARef) {
  const std::string text =
      "branch,experiment,trainer,max_epochs,batch_size,overrides\r\n"
      "main,mlp,cpu,3,4,\r\n"
      "\"feat/\"\"q\"\"\",transformer,cpu,3,4,scalebench.warmup=0\r\n";
  try {
    load_matrix_text("t.csv", text);
    FAIL() << "expected MatrixError";
  } catch (const MatrixError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("t.csv:3:1: branch: 'feat/\"q\"' is not a git ref"), std::string::npos)
        << message;
  }
}

TEST(MatrixCsvTest, NonHdf5DataPathIsAWarningAndSynthetic) {
  const std::string text =
      "branch,experiment,checkpoint_path,data_path,trainer,batch_size,overrides\n"
      "main,resnet18,ck.pt,path/to/data,cpu,4,scalebench.model=resnet50\n";
  const auto m = load_matrix_text("i.csv", text);
  ASSERT_EQ(m.cells.size(), 1U);
  EXPECT_EQ(m.cells[0].data.kind, "synthetic");
  EXPECT_EQ(m.cells[0].model.zoo, "resnet50");
  ASSERT_EQ(m.warnings.size(), 2U);
  EXPECT_NE(m.warnings[0].find("i.csv:2:"), std::string::npos);
  // Issue of trust: a built-in model is the same code on every branch, and the file says so.
  EXPECT_EQ(m.warnings[1].rfind("i.csv:1:1: warning: every row runs scalebench's built-in stand-in "
                                "model (resnet50)",
                                0),
            0U)
      << m.warnings[1];
  EXPECT_NE(m.warnings[1].find("differences between branches are noise, not your code"),
            std::string::npos);
}

TEST(MatrixCsvTest, RowCanNameItsOwnTorchScriptModelAndEverySetting) {
  const std::string text =
      "branch,experiment,trainer,max_epochs,batch_size,overrides\n"
      "main,im2im/segmentation,cpu,1,2,\"scalebench.torchscript=build/model.pt "
      "scalebench.input_shape=[1,16,32,32] scalebench.num_classes=2 scalebench.tf32=true "
      "scalebench.cpu_threads=3 scalebench.deterministic=true\"\n";
  const auto m = load_matrix_text("t.csv", text);
  ASSERT_EQ(m.cells.size(), 1U);
  const CellSpec& cell = m.cells[0];
  EXPECT_EQ(cell.model.torchscript, "build/model.pt");
  EXPECT_EQ(cell.model.zoo, "");
  EXPECT_EQ(cell.input_shape, (std::vector<int64_t>{1, 16, 32, 32}));
  EXPECT_EQ(cell.num_classes, 2);
  EXPECT_TRUE(cell.tf32);
  EXPECT_EQ(cell.cpu_threads, 3);
  EXPECT_TRUE(cell.deterministic);
  for (const char* bad : {"scalebench.input_shape=[1,0]", "scalebench.input_shape=1,2",
                          "scalebench.num_classes=0", "scalebench.torchscript="}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(load_matrix_text("t.csv",
                                  "branch,experiment,trainer,max_epochs,batch_size,overrides\n"
                                  "main,im2im/segmentation,cpu,1,2,\"" +
                                      std::string(bad) + "\"\n"),
                 InputError);
  }
}

TEST(MatrixSummaryTest, SummaryCountsCells) {
  const auto m = load_matrix_text("m.yaml", kBase);
  const auto text = summarize(m);
  EXPECT_EQ(text.rfind("16 cells (2 experiments", 0), 0U) << text;
  EXPECT_NE(text.find("batch sizes 8,16"), std::string::npos) << text;
}

}  // namespace
}  // namespace scalebench

namespace scalebench {
namespace {

TEST(MatrixValidFilesTest, EveryValidFileLoads) {
  const auto dir = scalebench::build_info::source_dir() / "tests" / "data" / "matrix" / "valid";
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ++files;
    EXPECT_NO_THROW(load_matrix(entry.path())) << entry.path();
  }
  EXPECT_GE(files, 1U);
}

TEST(MatrixValidFilesTest, QuotedNamesAreUnquoted) {
  const auto m = load_matrix(scalebench::build_info::source_dir() / "tests" / "data" / "matrix" /
                             "valid" / "quoting.yaml");
  EXPECT_EQ(m.name, "quoting");
  EXPECT_EQ(m.cells.size(), 4U);
  EXPECT_EQ(m.cells.front().experiment, "single-'quoted'");
}

}  // namespace
}  // namespace scalebench
