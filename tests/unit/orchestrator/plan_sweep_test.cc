// `scalebench plan` (through run_cli, in process) of a matrix that sweeps settings beyond the
// four named axes: one column per swept setting, and the example of issue 12 (two switches,
// one exclude) gives 3 cells with their own ids.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "orchestrator/cli.h"
#include "tests/unit/orchestrator/captured_cli.h"

namespace scalebench {
namespace {

using ::testing::HasSubstr;

std::pair<int, std::string> plan(const std::filesystem::path& matrix, const std::string& format) {
  const auto result = testing::run_captured({"plan", matrix.string(), "--format", format});
  return {result.status, result.out};
}

TEST(PlanSweep, SweptSettingsAreColumnsAndLabels) {
  const auto dir = std::filesystem::temp_directory_path() / "scalebench-plan-sweep";
  std::filesystem::create_directories(dir);
  const auto matrix = dir / "sweep.yaml";
  std::ofstream(matrix) << "name: sw\n"
                           "sweep: {batch_sizes: [8], channels_last: [false, true], tf32: [false, "
                           "true]}\n"
                           "exclude:\n"
                           "  - {channels_last: true, tf32: false}\n"
                           "experiments:\n"
                           "  - {name: r, model: resnet18, input_shape: [3, 32, 32]}\n";
  const auto [status, table] = plan(matrix, "table");
  ASSERT_EQ(status, 0) << table;
  std::istringstream lines(table);
  std::string header;
  std::getline(lines, header);
  EXPECT_THAT(header, HasSubstr("channels_last  tf32"));
  int rows = 0;
  for (std::string line; std::getline(lines, line);) ++rows;
  EXPECT_EQ(rows, 3);

  const auto [json_status, json_text] = plan(matrix, "json");
  ASSERT_EQ(json_status, 0);
  const auto cells = nlohmann::json::parse(json_text);
  ASSERT_EQ(cells.size(), 3U);
  std::set<std::string> ids;
  for (const auto& cell : cells) {
    ids.insert(cell.at("cell_id").get<std::string>());
    EXPECT_EQ(cell.at("label_settings"), nlohmann::json({"channels_last", "tf32"}));
  }
  EXPECT_EQ(ids.size(), 3U);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace scalebench
