// The matrix arguments shared by the commands that read a matrix (validate, plan).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "matrix/matrix.h"

namespace scalebench {

struct MatrixArguments {
  std::string matrix_path;
  int max_world_size = MatrixLimits{}.max_world_size;

  [[nodiscard]] MatrixLimits limits() const { return {.max_world_size = max_world_size}; }
};

/// Adds the positional `matrix` and `--max-world-size` to `command`, bound to `arguments`
/// (which must outlive the parse).
inline void add_matrix_arguments(CLI::App* command, MatrixArguments& arguments) {
  command->add_option("matrix", arguments.matrix_path, "Matrix file (.yaml, .yml or .csv)")
      ->required();
  command
      ->add_option("--max-world-size", arguments.max_world_size,
                   "Largest world size accepted (bigger ones are errors)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

}  // namespace scalebench
