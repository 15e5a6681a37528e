// Every setting is an axis (issue 12, Note [Every setting is an axis] in
// matrix/expand.cc): a list under `sweep` or in an experiment makes one cell per
// value, with its own id, the value in the label where it varies, matchable by `exclude`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/base/error.h"
#include "common/cell/settings.h"
#include "matrix/matrix.h"

namespace scalebench {
namespace {

using ::testing::HasSubstr;

std::set<std::string> ids_of(const ExpandedMatrix& matrix) {
  std::set<std::string> ids;
  for (const auto& cell : matrix.cells) ids.insert(cell.cell_id);
  return ids;
}

std::string error_of(const std::string& text) {
  try {
    load_matrix_text("m.yaml", text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(MatrixSweep, TwoSwitchesAndOneExcludeGiveThreeCellsPerBaseCell) {
  const auto matrix =
      load_matrix_text("m.yaml",
                       "sweep:\n"
                       "  batch_sizes: [8, 16]\n"
                       "  channels_last: [false, true]\n"
                       "  tf32: [false, true]\n"
                       "exclude:\n"
                       "  - {channels_last: true, tf32: false}\n"
                       "experiments:\n"
                       "  - {name: r, model: resnet18, input_shape: [3, 32, 32]}\n");
  ASSERT_EQ(matrix.cells.size(), 2U * 3U);
  EXPECT_EQ(ids_of(matrix).size(), matrix.cells.size()) << "every cell has its own id";
  for (const auto& cell : matrix.cells) {
    EXPECT_FALSE(cell.channels_last && !cell.tf32) << "excluded combination planned";
    const std::string label = cell_label(cell);
    EXPECT_THAT(
        label, HasSubstr(std::string("/channels_last=") + (cell.channels_last ? "true" : "false")));
    EXPECT_THAT(label, HasSubstr(std::string("/tf32=") + (cell.tf32 ? "true" : "false")));
  }
}

TEST(MatrixSweep, ASettingThatDoesNotVaryIsNotInTheLabelAndKeepsItsId) {
  const std::string experiment =
      "experiments:\n  - {name: a, model: mlp}\nsweep:\n  batch_sizes: [8]\n";
  const auto scalar = load_matrix_text("m.yaml", "defaults: {tf32: true}\n" + experiment);
  const auto list = load_matrix_text("m.yaml", experiment + "  tf32: [true]\n");
  ASSERT_EQ(scalar.cells.size(), 1U);
  ASSERT_EQ(list.cells.size(), 1U);
  EXPECT_EQ(scalar.cells[0].cell_id, list.cells[0].cell_id);
  EXPECT_THAT(cell_label(list.cells[0]), Not(HasSubstr("tf32")));
}

TEST(MatrixSweep, AnExperimentNarrowsTheSweep) {
  const auto matrix = load_matrix_text("m.yaml",
                                       "sweep:\n"
                                       "  batch_sizes: [8]\n"
                                       "  bucket_bytes: [1048576, 26214400]\n"
                                       "experiments:\n"
                                       "  - {name: a, model: mlp}\n"
                                       "  - {name: b, model: mlp, bucket_bytes: [1048576]}\n");
  std::multiset<std::string> experiments;
  for (const auto& cell : matrix.cells) experiments.insert(cell.experiment);
  EXPECT_EQ(experiments.count("a"), 2U);
  EXPECT_EQ(experiments.count("b"), 1U);
}

TEST(MatrixSweep, OptimizerFieldsSweepAndExcludeByTheirDottedKey) {
  const auto matrix = load_matrix_text("m.yaml",
                                       "sweep:\n"
                                       "  batch_sizes: [8]\n"
                                       "  optimizer: {lr: [0.1, 0.01, 0.001]}\n"
                                       "exclude:\n"
                                       "  - {optimizer.lr: 0.001}\n"
                                       "experiments:\n"
                                       "  - {name: a, model: mlp}\n");
  ASSERT_EQ(matrix.cells.size(), 2U);
  EXPECT_EQ(ids_of(matrix).size(), 2U);
  EXPECT_THAT(cell_label(matrix.cells[0]), HasSubstr("/optimizer.lr=0.1"));
}

TEST(MatrixSweep, RulesBetweenSettingsAreCheckedPerCell) {
  const std::string error = error_of(
      "sweep:\n"
      "  batch_sizes: [8]\n"
      "  device: [cpu, cuda]\n"
      "defaults: {backend: nccl}\n"
      "experiments:\n"
      "  - {name: a, model: mlp}\n");
  EXPECT_THAT(error, HasSubstr("backend nccl needs device cuda"));
}

TEST(MatrixSweep, CudaGraphsAreRefusedForTrainingUnlessExcluded) {
  const std::string matrix =
      "sweep:\n"
      "  batch_sizes: [8]\n"
      "  modes: [train, infer]\n"
      "  cuda_graphs: [false, true]\n"
      "experiments:\n"
      "  - {name: a, model: mlp}\n";
  const std::string error = error_of(matrix);
  EXPECT_THAT(error, HasSubstr("m.yaml:4:"));
  EXPECT_THAT(error, HasSubstr("cuda_graphs captures inference only"));
  EXPECT_THAT(error, HasSubstr("exclude: [{mode: train, cuda_graphs: true}]"));
  const auto excluded =
      load_matrix_text("m.yaml", matrix + "exclude:\n  - {mode: train, cuda_graphs: true}\n");
  ASSERT_EQ(excluded.cells.size(), 3U);
  for (const auto& cell : excluded.cells)
    EXPECT_FALSE(cell.cuda_graphs && cell.mode == Mode::kTrain);
}

TEST(MatrixSweep, BadListsAreInputErrorsWithFileAndLine) {
  EXPECT_THAT(error_of("defaults: {tf32: [false, true]}\nsweep: {batch_sizes: [8]}\n"
                       "experiments:\n  - {name: a, model: mlp}\n"),
              HasSubstr("m.yaml:1:"));
  EXPECT_THAT(error_of("defaults: {tf32: true}\nsweep: {batch_sizes: [8], tf32: [false]}\n"
                       "experiments:\n  - {name: a, model: mlp}\n"),
              HasSubstr("tf32 is set in both defaults and sweep"));
  EXPECT_THAT(error_of("sweep: {batch_sizes: [8], tf32: [true, true]}\n"
                       "experiments:\n  - {name: a, model: mlp}\n"),
              HasSubstr("m.yaml:1:"));
  EXPECT_THAT(error_of("sweep: {batch_sizes: [8], bucket_bytes: [0, 1048576]}\n"
                       "experiments:\n  - {name: a, model: mlp}\n"),
              HasSubstr("bucket_bytes"));
  EXPECT_THAT(error_of("sweep: {batch_sizes: [8], no_such_switch: [1, 2]}\n"
                       "experiments:\n  - {name: a, model: mlp}\n"),
              HasSubstr("no_such_switch"));
}

/// A valid value of `setting` other than its default.
std::optional<SettingValue> other_value(const SettingDef& setting) {
  const SettingValue fallback = default_value(setting);
  std::vector<SettingValue> candidates;
  switch (setting.type) {
    case SettingType::kBool:
      candidates = {!std::get<bool>(fallback)};
      break;
    case SettingType::kInt: {
      const int64_t value = std::get<int64_t>(fallback);
      candidates = {int64_t{64}, value + 1, value * 2, int64_t{3}};
      break;
    }
    case SettingType::kNumber: {
      const double value = std::get<double>(fallback);
      candidates = {value / 2, value * 2, 0.5, 3.0};
      break;
    }
    case SettingType::kName:
      for (const auto choice : setting.choices) candidates.emplace_back(std::string(choice));
      break;
  }
  for (const auto& candidate : candidates) {
    if (candidate != fallback && setting_value_problem(setting, candidate).empty()) {
      return candidate;
    }
  }
  return std::nullopt;
}

TEST(MatrixSweep, EverySettingIsSweepable) {
  int swept = 0;
  for (const auto& setting : settings_table()) {
    SCOPED_TRACE(std::string(setting.key));
    const auto other = other_value(setting);
    ASSERT_TRUE(other.has_value()) << "no second value to sweep";
    const std::string values =
        "[" + setting_text(default_value(setting)) + ", " + setting_text(*other) + "]";
    // Inference ignores the optimizer and training the sample count, and CUDA graphs and
    // compiled twins are for inference only: pick the mode that uses the setting; the axes
    // by name are swept through their list key.
    const bool infer =
        setting.key == "samples" || setting.key == "cuda_graphs" || setting.key == "compile";
    std::string sweep = "sweep:\n  modes: [" + std::string(infer ? "infer" : "train") + "]\n";
    const std::string key(setting.key);
    if (setting.axis) {
      if (key == "mode") continue;  // fixed above; its sweep is the modes test elsewhere
      sweep += "  " + std::string(setting.list_key) + ": " + values + "\n";
    } else if (key.starts_with("optimizer.")) {
      sweep += "  optimizer: {" + key.substr(10) + ": " + values + "}\n";
    } else {
      sweep += "  " + key + ": " + values + "\n";
    }
    if (key != "batch_size") sweep += "  batch_sizes: [8]\n";
    const std::string text = sweep + "experiments:\n  - {name: a, model: mlp}\n";
    ExpandedMatrix matrix;
    try {
      matrix = load_matrix_text("m.yaml", text);
    } catch (const InputError& e) {
      // A setting outside the identity (interleave) makes the same cell twice: refused.
      if (setting.id == IdRule::kNever) {
        EXPECT_THAT(e.what(), HasSubstr("duplicates the same cell"));
        ++swept;
        continue;
      }
      ADD_FAILURE() << e.what() << "\n" << text;
      continue;
    }
    EXPECT_NE(setting.id, IdRule::kNever) << "two values of it make the same cell twice";
    if (key == "repetitions") {  // Note [Repetitions]: 1 cell, then `other` cells
      ASSERT_EQ(matrix.cells.size(), 1U + static_cast<size_t>(std::get<int64_t>(*other)));
      matrix.cells.erase(matrix.cells.begin() + 1, matrix.cells.end() - 1);
    }
    ASSERT_EQ(matrix.cells.size(), 2U) << text;
    EXPECT_NE(matrix.cells[0].cell_id, matrix.cells[1].cell_id) << "the value is in the id";
    if (key != "samples") {  // samples 0 (auto) is resolved to batch x world x iterations
      EXPECT_EQ(setting.get(matrix.cells[0]), default_value(setting));
    }
    EXPECT_EQ(setting.get(matrix.cells[1]), *other);
    if (!setting.axis) {
      EXPECT_THAT(cell_label(matrix.cells[1]), HasSubstr(key + "=" + setting_text(*other)));
    }
    ++swept;
  }
  EXPECT_GE(swept, static_cast<int>(settings_table().size()) - 1);
}

}  // namespace
}  // namespace scalebench
