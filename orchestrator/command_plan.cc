// `scalebench plan <matrix>`: print the expanded cells as a table or as JSON.
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/cell/settings.h"
#include "matrix/resolved_matrix.h"
#include "orchestrator/commands.h"
#include "orchestrator/matrix_arguments.h"

namespace scalebench {
namespace {

/// The swept settings shown as extra columns: every key of any cell's label_settings, in
/// the order first seen (Note [Every setting is an axis]).
std::vector<std::string> swept_keys(const std::vector<CellSpec>& cells) {
  std::vector<std::string> keys;
  for (const auto& cell : cells) {
    for (const auto& key : cell.label_settings) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
  }
  return keys;
}

std::vector<std::string> table_row(const CellSpec& cell, const std::vector<std::string>& swept) {
  std::vector<std::string> row{
      cell.cell_id,
      cell.branch.empty() ? "-" : cell.branch,
      cell.experiment,
      to_string(cell.mode),
      batch_text(cell.batch_size),
      std::to_string(cell.world_size),
      to_string(cell.precision),
      to_string(cell.device),
      iterations_auto(cell) ? std::string("auto") : std::to_string(cell.measured_iterations)};
  for (const auto& key : swept) {
    const SettingDef* setting = find_setting(key);
    row.push_back(setting != nullptr ? setting_text(*setting, setting->get(cell)) : "");
  }
  return row;
}

/// Left-aligned columns separated by two spaces, one header line.
void print_table(const std::vector<CellSpec>& cells, std::ostream& out) {
  const auto swept = swept_keys(cells);
  std::vector<std::vector<std::string>> rows{{"cell_id", "branch", "experiment", "mode", "batch",
                                              "world", "precision", "device", "iterations"}};
  rows.front().insert(rows.front().end(), swept.begin(), swept.end());
  for (const auto& cell : cells) rows.push_back(table_row(cell, swept));
  std::vector<size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_status) {
  auto* command =
      app.add_subcommand("plan", "Expand a matrix file and print its cells; runs nothing");
  struct Options {
    MatrixArguments matrix;
    std::string format = "table";
  };
  auto options = std::make_shared<Options>();
  add_matrix_arguments(command, options->matrix);
  command->add_option("--format", options->format, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  command->callback([options, &exit_status] {
    // Read-only git: the ids are the ones `run` gives the same cells.
    const ResolvedMatrix matrix = resolve_matrix(
        options->matrix.matrix_path, {.limits = options->matrix.limits(), .work_dir = {}});
    for (const auto& warning : matrix.warnings()) std::cerr << warning << "\n";
    if (options->format == "json") {
      nlohmann::json cells = nlohmann::json::array();
      for (const auto& cell : matrix.cells()) cells.push_back(to_json(cell));
      std::cout << cells.dump(2) << "\n";
    } else {
      print_table(matrix.cells(), std::cout);
    }
    exit_status = kExitOk;
  });
}

}  // namespace scalebench
