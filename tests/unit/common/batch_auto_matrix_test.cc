// `batch_size: auto` in matrices (issue 14, Note [Batch search]): YAML lists and scalars,
// CytoDL rows (the batch_size column), the search settings with
// their ranges, and the errors a user can make, each with file:line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/base/error.h"
#include "common/cell/settings.h"
#include "matrix/matrix.h"

namespace scalebench {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& name, const std::string& text) {
  try {
    load_matrix_text(name, text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(BatchAutoMatrix, AutoIsOneValueOfTheBatchAxis) {
  const auto m = load_matrix_text("m.yaml",
                                  "sweep: {batch_sizes: [auto, 16], modes: [train, infer]}\n"
                                  "experiments:\n"
                                  "  - {name: a, model: mlp, memory_limit_mb: 512, "
                                  "latency_slo_ms: 20, max_batch: 256}\n");
  ASSERT_EQ(m.cells.size(), 4U);
  int automatic = 0;
  for (const auto& cell : m.cells) {
    EXPECT_EQ(cell.memory_limit_mb, 512);
    EXPECT_EQ(cell.latency_slo_ms, 20);
    EXPECT_EQ(cell.max_batch, 256);
    if (cell.batch_size != kBatchAuto) continue;
    ++automatic;
    EXPECT_THAT(cell_label(cell), HasSubstr("/bauto/"));
    // The worker sizes an auto inference cell's dataset from the batch it runs.
    EXPECT_EQ(cell.samples, 0);
    EXPECT_EQ(to_json(cell).at("batch_size"), 0);
  }
  EXPECT_EQ(automatic, 2);
  EXPECT_THAT(summarize(m), HasSubstr("batch sizes auto,16"));
}

TEST(BatchAutoMatrix, TheSearchSettingsKeepTheIdsOfEarlierCells) {
  const std::string base = "experiments:\n  - {name: a, model: mlp, batch_sizes: [8]}\n";
  const auto plain = load_matrix_text("m.yaml", base);
  const auto defaults =
      load_matrix_text("m.yaml",
                       "defaults: {min_batch: 1, max_batch: 65536, safety_margin: 0.1, "
                       "probe_iterations: 5, memory_limit_mb: 0, latency_slo_ms: 0}\n" +
                           base);
  EXPECT_EQ(plain.cells.at(0).cell_id, defaults.cells.at(0).cell_id);
  const auto limited = load_matrix_text("m.yaml", "defaults: {memory_limit_mb: 100}\n" + base);
  EXPECT_NE(plain.cells.at(0).cell_id, limited.cells.at(0).cell_id);
}

TEST(BatchAutoMatrix, CytoDlRowsSayAutoInTheBatchSizeColumn) {
  const std::string header = "branch,experiment,trainer,max_epochs,batch_size,overrides\n";
  const auto column = load_matrix_text("t.csv", header + "main,im2im/segmentation,cpu,1,auto,\n");
  ASSERT_EQ(column.cells.size(), 1U);
  EXPECT_EQ(column.cells[0].batch_size, kBatchAuto);
  EXPECT_THAT(error_of("t.csv", header + "main,im2im/segmentation,cpu,1,automatic,\n"),
              HasSubstr("t.csv:2"));
  // The search settings are overrides like any other setting.
  const auto tuned = load_matrix_text(
      "t.csv", header +
                   "main,im2im/segmentation,cpu,1,auto,\"scalebench.memory_limit_mb=2048 "
                   "scalebench.safety_margin=0.2\"\n");
  ASSERT_EQ(tuned.cells.size(), 1U);
  EXPECT_EQ(tuned.cells[0].memory_limit_mb, 2048);
  EXPECT_EQ(tuned.cells[0].safety_margin, 0.2);
}

TEST(BatchAutoMatrix, BadValuesAreErrorsWithFileAndLine) {
  const std::string experiments = "experiments:\n  - {name: a, model: mlp}\n";
  EXPECT_THAT(error_of("m.yaml", "sweep: {batch_sizes: [automatic]}\n" + experiments),
              HasSubstr("m.yaml:1"));
  EXPECT_THAT(error_of("m.yaml", "sweep: {batch_sizes: [0]}\n" + experiments),
              HasSubstr("m.yaml:1"));
  const std::string inverted =
      error_of("m.yaml", "sweep: {batch_sizes: [auto]}\ndefaults: {min_batch: 64, max_batch: 8}\n" +
                             experiments);
  EXPECT_THAT(inverted, HasSubstr("min_batch 64 is above max_batch 8"));
  EXPECT_THAT(
      error_of("m.yaml", "defaults: {safety_margin: 1}\nsweep: {batch_sizes: [4]}\n" + experiments),
      HasSubstr("safety_margin must be < 1"));
  EXPECT_THAT(error_of("m.yaml", "defaults: {probe_iterations: 0}\nsweep: {batch_sizes: [4]}\n" +
                                     experiments),
              HasSubstr("m.yaml:1"));
}

TEST(BatchAutoMatrix, TheKeywordIsShownAsWritten) {
  const SettingDef* batch = find_setting("batch_size");
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(setting_text(*batch, SettingValue(int64_t{0})), "auto");
  EXPECT_EQ(setting_text(*batch, SettingValue(int64_t{16})), "16");
  EXPECT_EQ(parse_setting_text(*batch, "auto"), SettingValue(int64_t{0}));
  EXPECT_FALSE(parse_setting_text(*batch, "0").has_value()) << "0 is not a way to write auto";
  EXPECT_EQ(batch_text(kBatchAuto), "auto");
}

}  // namespace
}  // namespace scalebench
