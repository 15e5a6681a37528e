// `scalebench validate <matrix>`: load, check and expand a matrix; run nothing.
// `scalebench schema matrix|experiment`: the complete JSON Schema it checks against.
#include <iostream>
#include <memory>
#include <set>
#include <string>

#include "common/base/diagnostics.h"
#include "common/matrix/matrix.h"
#include "common/matrix/schema.h"
#include "orchestrator/commands.h"
#include "orchestrator/console_text.h"
#include "orchestrator/matrix_arguments.h"

namespace scalebench {

namespace {

/// A warning when the matrix has AOTInductor cells and this build cannot load packages
/// (its worker would fail each of them at run time); "" otherwise.
std::string aoti_loader_warning(const ExpandedMatrix& matrix, const WorkerFactory& worker) {
  if (!worker.aoti_loader_available || worker.aoti_loader_available()) return "";
  std::set<std::string> experiments;
  size_t cells = 0;
  for (const auto& cell : matrix.cells) {
    if (cell.model.aoti.empty() && cell.compile != "aoti") continue;
    experiments.insert(cell.experiment);
    ++cells;
  }
  if (cells == 0) return "";
  const std::string names = join({experiments.begin(), experiments.end()});
  const std::string torch = worker.library_versions ? worker.library_versions()["torch"] : "";
  return "warning: this build's LibTorch" + (torch.empty() ? "" : " " + torch) +
         " has no AOTInductor package loader (torch/csrc/inductor/aoti_package, LibTorch 2.6 or "
         "newer), so the " +
         std::to_string(cells) + " cell(s) with model {aoti: ...} or compile: aoti (experiment " +
         names +
         ") will fail: rebuild scalebench against a newer torch (setup.sh), or use TorchScript "
         "instead (compile: torchscript; for a file, python -m scalebench_client.export "
         "--torchscript)";
}

}  // namespace

void add_validate_command(CLI::App& app, int& exit_status, const WorkerFactory& worker) {
  auto* command = app.add_subcommand(
      "validate", "Check a matrix file (YAML or CytoDL CSV) and count its cells; runs nothing");
  auto options = std::make_shared<MatrixArguments>();
  add_matrix_arguments(command, *options);
  command->callback([options, &exit_status, worker] {
    const ExpandedMatrix matrix = load_matrix(options->matrix_path, options->limits());
    for (const auto& warning : matrix.warnings) std::cerr << warning << "\n";
    if (const auto warning = aoti_loader_warning(matrix, worker); !warning.empty()) {
      std::cerr << wrap_words(warning, "", "  ");
    }
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
