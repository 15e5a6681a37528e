// The settings table drives the reader, the expansion, the cell JSON, the schema and the
// docs (Note [Settings table]); these tests hold each of them to it.
//
// After changing the table, regenerate the docs table with
//   SCALEBENCH_UPDATE_DOCS=1 build/release/tests/common_unit_tests
//   --gtest_filter='SettingsTable.Docs*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "common/base/build_info.h"
#include "common/cell/settings.h"
#include "matrix/matrix.h"
#include "matrix/schema.h"

namespace scalebench {
namespace {

const std::filesystem::path kSource(scalebench::build_info::source_dir());

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(SettingsTable, KeysAreUniqueAndRowsComplete) {
  std::set<std::string> keys;
  for (const auto& setting : settings_table()) {
    EXPECT_TRUE(keys.insert(std::string(setting.key)).second) << setting.key;
    if (setting.axis) {
      EXPECT_TRUE(keys.insert(std::string(setting.list_key)).second) << setting.list_key;
    } else {
      EXPECT_TRUE(setting.list_key.empty()) << setting.key;
    }
    EXPECT_FALSE(setting.json_key.empty()) << setting.key;
    EXPECT_FALSE(setting.doc.empty()) << setting.key;
    ASSERT_NE(setting.get, nullptr) << setting.key;
    ASSERT_NE(setting.set, nullptr) << setting.key;
    EXPECT_EQ(setting_value_problem(setting, default_value(setting)), "")
        << setting.key << ": the default must be inside the range";
    if (setting.type == SettingType::kName) {
      EXPECT_FALSE(setting.choices.empty()) << setting.key;
    }
  }
}

TEST(SettingsTable, SetThenGetGivesTheValueBack) {
  for (const auto& setting : settings_table()) {
    SettingValue other;
    switch (setting.type) {
      case SettingType::kBool:
        other = !std::get<bool>(default_value(setting));
        break;
      case SettingType::kInt:
        other = static_cast<int64_t>(setting.minimum) + 1;
        break;
      case SettingType::kNumber:
        other = (setting.minimum + setting.maximum) / 4;
        break;
      case SettingType::kName:
        other = std::string(setting.choices.back());
        break;
    }
    CellSpec cell;
    setting.set(cell, other);
    EXPECT_EQ(setting.get(cell), other) << setting.key;
    // ... and the cell's JSON carries it: the id changes, and the JSON reads back.
    if (setting.id != IdRule::kNever && other != default_value(setting)) {
      EXPECT_NE(compute_cell_id(cell), compute_cell_id(CellSpec{})) << setting.key;
    }
    EXPECT_EQ(cell_spec_from_json(to_json(cell)), cell) << setting.key;
  }
}

TEST(SettingsTable, RangeProblemsNameTheKeyAndTheFix) {
  const SettingDef* batch = find_setting("batch_size");
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(find_setting("batch_sizes", true), batch);
  EXPECT_EQ(find_setting("batch_sizes"), nullptr);
  EXPECT_NE(setting_value_problem(*batch, int64_t{2'000'000}).find("absurd"), std::string::npos);
  EXPECT_NE(setting_value_problem(*batch, int64_t{-1}).find("batch_size must be >= 1"),
            std::string::npos);
  EXPECT_EQ(setting_value_problem(*batch, int64_t{0}), "") << "0 encodes auto (kBatchAuto)";
  const SettingDef* momentum = find_setting("optimizer.momentum");
  ASSERT_NE(momentum, nullptr);
  EXPECT_NE(setting_value_problem(*momentum, 1.0).find("must be < 1"), std::string::npos);
  EXPECT_EQ(setting_value_problem(*momentum, 0.9), "");
  const SettingDef* precision = find_setting("precision");
  EXPECT_NE(setting_value_problem(*precision, std::string("fp8")).find("fp32, fp16, bf16"),
            std::string::npos);
  EXPECT_EQ(parse_setting_text(*precision, "fp8"), std::nullopt);
  EXPECT_EQ(parse_setting_text(*find_setting("tf32"), "true"), SettingValue(true));
  EXPECT_EQ(parse_setting_text(*find_setting("warmup"), "3x"), std::nullopt);
}

// Note [Cell identity]: the JSON, and so the ids of existing results, must not change when
// the table replaces hand-written fields. This is the JSON the earlier code wrote for a
// default cell, key for key.
TEST(SettingsTable, CanonicalJsonKeepsTheEarlierLayout) {
  const auto expected = nlohmann::json::parse(R"({
    "backend": "auto", "batch_size": 1, "branch": "", "bucket_bytes": 26214400,
    "channels_last": false, "checkpoint": "", "commit": "",
    "data": {"inputs": "", "kind": "synthetic", "path": "", "targets": ""},
    "device": "auto", "experiment": "", "first_bucket_bytes": 1048576, "input_shape": [],
    "measured_iterations": 10, "mode": "train",
    "model": {"torchscript": "", "zoo": ""}, "num_classes": 0,
    "optimizer": {"lr": 0.01, "momentum": 0.0, "name": "sgd", "weight_decay": 0.0},
    "precision": "fp32", "samples": 0, "seed": 0, "tf32": false, "timeout_s": 600.0,
    "warmup_iterations": 2, "world_size": 1})");
  EXPECT_EQ(canonical_json(CellSpec{}).dump(), expected.dump());
}

TEST(SettingsTable, SchemaHasEverySettingFromTheTableOnly) {
  const auto experiment = schema_document("experiment.schema.json");
  const auto matrix = schema_document("matrix.schema.json");
  const auto& defaults = matrix["properties"]["defaults"]["properties"];
  const auto& sweep = matrix["properties"]["sweep"]["properties"];
  for (const auto& setting : settings_table()) {
    const std::string key(setting.key);
    if (key.starts_with("optimizer.")) {
      EXPECT_TRUE(experiment["definitions"]["optimizer"]["properties"].contains(key.substr(10)))
          << key;
      continue;
    }
    EXPECT_EQ(experiment["definitions"][key], setting_value_schema(setting)) << key;
    const std::string written = setting.axis ? std::string(setting.list_key) : key;
    EXPECT_TRUE(experiment["properties"].contains(written)) << written;
    EXPECT_TRUE((setting.axis ? sweep : defaults).contains(written)) << written;
  }
  // The files themselves hold no setting: the table is their one source.
  const auto raw = nlohmann::json::parse(read(kSource / "schemas" / "experiment.schema.json"));
  for (const auto& setting : settings_table()) {
    EXPECT_FALSE(raw["properties"].contains(std::string(setting.key))) << setting.key;
    EXPECT_FALSE(raw["definitions"].contains(std::string(setting.key))) << setting.key;
  }
}

TEST(SettingsTable, DocsTableIsTheGeneratedOne) {
  const auto path = kSource / "docs" / "matrix-reference.md";
  const std::string doc = read(path);
  const std::string begin = "<!-- settings-table:begin";
  const std::string end = "<!-- settings-table:end -->";
  const auto b = doc.find(begin);
  const auto e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/matrix-reference.md lost its settings-table markers";
  ASSERT_NE(e, std::string::npos);
  const auto body_start = doc.find('\n', b) + 1;
  const std::string current = doc.substr(body_start, e - body_start);
  const std::string wanted = settings_reference_markdown();
  if (current != wanted && std::getenv("SCALEBENCH_UPDATE_DOCS") != nullptr) {
    std::ofstream(path) << doc.substr(0, body_start) << wanted << doc.substr(e);
    GTEST_SKIP() << "rewrote the settings table of " << path;
  }
  EXPECT_EQ(current, wanted) << "regenerate: SCALEBENCH_UPDATE_DOCS=1 common_unit_tests "
                                "--gtest_filter='SettingsTable.Docs*'";
}

TEST(SettingsTable, AnySettingReachesTheCellFromYamlAndCsv) {
  const auto yaml = load_matrix_text("m.yaml",
                                     "sweep: {batch_sizes: [2]}\n"
                                     "defaults: {tf32: true, cudnn_benchmark: true,\n"
                                     "           optimizer: {lr: 0.5}}\n"
                                     "experiments:\n  - {model: mlp, warmup: 7}\n");
  ASSERT_EQ(yaml.cells.size(), 1U);
  EXPECT_TRUE(yaml.cells[0].tf32);
  EXPECT_TRUE(yaml.cells[0].cudnn_benchmark);
  EXPECT_TRUE(canonical_json(yaml.cells[0]).contains("cudnn_benchmark"));  // not the default
  EXPECT_EQ(yaml.cells[0].optimizer.lr, 0.5);
  EXPECT_EQ(yaml.cells[0].warmup_iterations, 7);
  const auto csv =
      load_matrix_text("t.csv",
                       "branch,experiment,trainer,max_epochs,batch_size,overrides\n"
                       "main,mlp,cpu,3,4,\"scalebench.tf32=true scalebench.optimizer.lr=0.25 "
                       "scalebench.bucket_bytes=4096\"\n");
  ASSERT_EQ(csv.cells.size(), 1U);
  EXPECT_TRUE(csv.cells[0].tf32);
  EXPECT_EQ(csv.cells[0].optimizer.lr, 0.25);
  EXPECT_EQ(csv.cells[0].bucket_bytes, 4096);
  try {
    load_matrix_text("t.csv",
                     "branch,experiment,trainer,max_epochs,batch_size,overrides\n"
                     "main,mlp,cpu,3,4,scalebench.warmup=99999999\n");
    FAIL() << "expected a MatrixError";
  } catch (const MatrixError& e) {
    EXPECT_NE(std::string(e.what()).find("t.csv:2:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("warmup 99999999 is absurd"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace scalebench
