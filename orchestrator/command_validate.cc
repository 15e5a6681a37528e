// `scalebench validate <matrix>`: load, check and expand a matrix; run nothing.
// `scalebench schema matrix|experiment`: the complete JSON Schema it checks against.
#include <iostream>
#include <memory>
#include <string>

#include "common/matrix/matrix.h"
#include "common/matrix/schema.h"
#include "orchestrator/commands.h"
#include "orchestrator/console_text.h"
#include "orchestrator/matrix_arguments.h"

namespace scalebench {

void add_validate_command(CLI::App& app, int& exit_status) {
  auto* command = app.add_subcommand(
      "validate", "Check a matrix file (YAML or CytoDL CSV) and count its cells; runs nothing");
  auto options = std::make_shared<MatrixArguments>();
  add_matrix_arguments(command, *options);
  command->callback([options, &exit_status] {
    const ExpandedMatrix matrix = load_matrix(options->matrix_path, options->limits());
    for (const auto& warning : matrix.warnings) std::cerr << warning << "\n";
    std::cout << wrap_words(options->matrix_path + ": OK, " + summarize(matrix), "", "  ");
    exit_status = kExitOk;
  });
}

void add_schema_command(CLI::App& app, int& exit_status) {
  auto* command = app.add_subcommand(
      "schema",
      "Print the complete JSON Schema of matrix or experiment files (the schemas/ file with "
      "the settings of the settings table), e.g. for an editor");
  auto which = std::make_shared<std::string>("matrix");
  command->add_option("which", *which, "matrix or experiment")
      ->check(CLI::IsMember({"matrix", "experiment"}))
      ->capture_default_str();
  command->callback([which, &exit_status] {
    std::cout << schema_document(*which + ".schema.json").dump(2) << "\n";
    exit_status = kExitOk;
  });
}

}  // namespace scalebench
