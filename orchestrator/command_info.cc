// `scalebench info results.h5 [--format table|json]`: provenance, status counts and one
// row per cell with its summary. Needs no MPI.
#include <iostream>
#include <memory>
#include <string>

#include "orchestrator/commands.h"
#include "orchestrator/summary_table.h"
#include "results/reader.h"
#include "results/store.h"

namespace scalebench {
namespace {

std::string text(const nlohmann::json& object, const char* key) {
  if (!object.contains(key)) return "";
  const auto& value = object.at(key);
  return value.is_string() ? value.get<std::string>() : value.dump();
}

void print_table(const nlohmann::json& overview, std::ostream& out) {
  const auto& p = overview.at("provenance");
  out << "# file:     " << text(overview, "path") << " (layout " << text(overview, "layout_version")
      << ")\n"
      << "# tool:     scalebench " << text(p, "tool_version") << " " << text(p, "tool_commit")
      << (text(p, "tool_dirty") == "1" ? " (dirty)" : "") << ", " << text(p, "build_type") << "\n"
      << "# versions: torch " << text(p, "torch_version") << ", cuda " << text(p, "cuda_version")
      << ", nccl " << text(p, "nccl_version") << ", hdf5 " << text(p, "hdf5_version") << "\n"
      << "# mpi:      " << text(p, "mpi_version") << "\n"
      << "# job:      " << text(p, "mpi_size") << " ranks on " << text(p, "hosts") << "\n"
      << "# matrix:   " << text(p, "matrix_path") << " (hash " << text(p, "matrix_hash") << ")\n"
      << "# time:     " << text(p, "start_time") << " .. "
      << (text(p, "end_time").empty() ? "(running or interrupted)" : text(p, "end_time"))
      << ", runs " << text(p, "run_count") << "\n";
  // Since layout 1.6: the matrix's warnings, repeated where the results are read (a CytoDL
  // task file of built-in stand-ins: differences between branches are noise).
  const auto warnings = nlohmann::json::parse(text(p, "matrix_warnings"), nullptr, false);
  if (warnings.is_array()) {
    for (const auto& warning : warnings) {
      if (warning.is_string()) out << "# " << warning.get<std::string>() << "\n";
    }
  }
  out << format_summary_table(summary_rows(overview)) << format_mfu(overview)
      << format_series_table(overview) << format_program_times(overview) << format_damage(overview);
}

bool has_damage(const nlohmann::json& overview) {
  return !overview.value("damaged_cells", nlohmann::json::object()).empty() ||
         !overview.value("problems", nlohmann::json::array()).empty();
}

}  // namespace

void add_info_command(CLI::App& app, int& exit_status) {
  auto* command =
      app.add_subcommand("info", "Show a results file: provenance, status counts, cell summaries");
  struct Options {
    std::string path;
    std::string format = "table";
  };
  auto options = std::make_shared<Options>();
  command->add_option("results", options->path, "Results file (HDF5)")->required();
  command->add_option("--format", options->format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  command->callback([options, &exit_status] {
    const nlohmann::json overview = read_results_overview(options->path);
    if (options->format == "json") {
      std::cout << info_json(options->path, overview).dump(2) << "\n";
    } else {
      print_table(overview, std::cout);
    }
    // The readable cells are shown; damage is listed and makes the status 1.
    exit_status = has_damage(overview) ? kExitCellsFailed : kExitOk;
  });
}

}  // namespace scalebench
