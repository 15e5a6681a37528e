// `scalebench validate <matrix>`: load, check and expand a matrix; run nothing.
#include <iostream>
#include <memory>
#include <string>

#include "common/matrix.h"
#include "orchestrator/commands.h"

namespace scalebench {

void add_validate_command(CLI::App& app, int& exit_status) {
  auto* command = app.add_subcommand(
      "validate", "Check a matrix file (YAML or CytoDL CSV) and count its cells; runs nothing");
  struct Options {
    std::string matrix_path;
    int max_world_size = MatrixLimits{}.max_world_size;
  };
  auto options = std::make_shared<Options>();
  command->add_option("matrix", options->matrix_path, "Matrix file (.yaml, .yml or .csv)")
      ->required();
  command
      ->add_option("--max-world-size", options->max_world_size,
                   "Largest world size accepted (bigger ones are errors)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->callback([options, &exit_status] {
    const MatrixLimits limits{.max_world_size = options->max_world_size};
    const ExpandedMatrix matrix = load_matrix(options->matrix_path, limits);
    for (const auto& warning : matrix.warnings) std::cerr << warning << "\n";
    std::cout << options->matrix_path << ": OK, " << summarize(matrix) << "\n";
    exit_status = kExitOk;
  });
}

}  // namespace scalebench
