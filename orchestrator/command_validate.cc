// `scalebench validate <matrix>`: load, check and expand a matrix; run nothing (with
// --preflight: also each program configuration's check, Note [Program preflight]).
// `scalebench schema matrix|experiment`: the complete JSON Schema it checks against.
#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/base/diagnostics.h"
#include "matrix/branch_resolution.h"
#include "matrix/matrix.h"
#include "matrix/resolved_matrix.h"
#include "matrix/schema.h"
#include "orchestrator/cell_inputs.h"
#include "orchestrator/commands.h"
#include "orchestrator/console_text.h"
#include "orchestrator/matrix_arguments.h"
#include "program/preflight/program_preflight.h"

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

// Note [Validate preflight worktrees]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `validate --preflight` runs the checks of Note [Program preflight] (program_preflight.h)
// where `run` would: each branch's code. It checks the branches out as `run` does
// (checkout_branch: one detached worktree per commit), below --work-dir when given (pass
// run's, `<output>.work`, and the run reuses them), else below a temporary folder that it
// removes when it ends, each worktree with `git worktree remove`, so the repository keeps no
// record of them. Rejected: checking in the repository's own checkout (it is one branch, with
// whatever uncommitted changes it has: not what `run` runs). Like run's, the check comes
// before the prepare steps, which validate does not run.

/// A temporary --work-dir of `validate --preflight`: removed with its worktrees (RAII).
class ScratchWorkDir {
 public:
  explicit ScratchWorkDir(std::filesystem::path repo) : repo_(std::move(repo)) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "scalebench-preflight-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw Error("cannot create a temporary folder for the worktrees of validate --preflight ('" +
                  pattern + "'): " + std::strerror(errno) + "; pass --work-dir");
    }
    path_ = pattern;
  }
  ScratchWorkDir(const ScratchWorkDir&) = delete;
  ScratchWorkDir& operator=(const ScratchWorkDir&) = delete;
  ~ScratchWorkDir() {
    std::error_code error;
    std::vector<std::filesystem::path> worktrees;  // listed first: removing ends the listing
    for (const auto& entry : std::filesystem::directory_iterator(path_ / "worktrees", error)) {
      worktrees.push_back(entry.path());
    }
    for (const auto& worktree : worktrees) {
      try {
        remove_worktree(repo_, worktree);
      } catch (const std::exception& e) {
        std::cerr << "warning: " << e.what() << "\n";
      }
    }
    std::filesystem::remove_all(path_, error);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path repo_;
  std::filesystem::path path_;
};

/// `validate --preflight`: the matrix resolved with worktrees, then every check run.
void validate_with_preflight(const MatrixArguments& arguments, const std::string& work_dir,
                             const WorkerFactory& worker) {
  const ExpandedMatrix loaded = load_matrix(arguments.matrix_path, arguments.limits());
  std::optional<ScratchWorkDir> scratch;
  if (work_dir.empty()) scratch.emplace(matrix_repo_path(loaded));
  const std::filesystem::path worktrees_dir =
      scratch ? scratch->path() : std::filesystem::path(work_dir);
  const ResolvedMatrix matrix = resolve_matrix(
      arguments.matrix_path, {.limits = arguments.limits(), .work_dir = worktrees_dir});
  for (const auto& warning : matrix.warnings()) std::cerr << warning << "\n";
  if (const auto warning = aoti_loader_warning(matrix.matrix(), worker); !warning.empty()) {
    std::cerr << wrap_words(warning, "", "  ");
  }
  std::cout << wrap_words(arguments.matrix_path + ": OK, " + summarize(matrix.matrix()), "", "  ")
            << std::flush;
  std::map<std::string, std::filesystem::path> worktrees;
  for (const auto& [ref, branch] : matrix.branches()) worktrees.emplace(ref, branch.worktree);
  const CellInputs trees(std::filesystem::absolute(arguments.matrix_path).parent_path(),
                         std::move(worktrees));
  const char* path = std::getenv("PATH");
  const PreflightContext context{
      .tree_of = [&trees](const CellSpec& cell) { return trees.tree_of(cell); },
      .scratch_dir = worktrees_dir / "preflight",
      .caller_path = path ? path : ""};
  const std::string summary = preflight_program_cells(
      matrix.cells(), context, {},
      "to run without the check, pass --no-preflight to scalebench run or set preflight: none "
      "in the program",
      [](const std::string& line) { std::cerr << line << "\n"; });
  std::cout << (summary.empty() ? "preflight: no program cell has a check (preflight: hydra or "
                                  "a command of your own; docs/programs.md#preflight)"
                                : summary)
            << "\n";
}

}  // namespace

void add_validate_command(CLI::App& app, int& exit_status, const WorkerFactory& worker) {
  auto* command = app.add_subcommand(
      "validate",
      "Check a matrix file (YAML or CytoDL CSV) and count its cells; runs nothing but, with "
      "--preflight, each program configuration's check");
  auto options = std::make_shared<MatrixArguments>();
  add_matrix_arguments(command, *options);
  auto preflight = std::make_shared<bool>(false);
  auto work_dir = std::make_shared<std::string>();
  command->add_flag("--preflight", *preflight,
                    "Also run each distinct program configuration's check (preflight: hydra "
                    "or a command of your own) in its branch's worktree, as run does before "
                    "its first cell");
  command->add_option("--work-dir", *work_dir,
                      "With --preflight: where the branches are checked out (default: a "
                      "temporary folder, removed afterwards; run's <output>.work is reused "
                      "by the run)");
  command->callback([options, preflight, work_dir, &exit_status, worker] {
    if (*preflight) {
      validate_with_preflight(*options, *work_dir, worker);
      exit_status = kExitOk;
      return;
    }
    if (!work_dir->empty()) {
      throw InputError(
          "--work-dir is for --preflight (where the branches are checked out); "
          "add --preflight or leave --work-dir out");
    }
    const ExpandedMatrix matrix = load_matrix(options->matrix_path, options->limits());
    // The refs of a local checkout named by repo: are checked as run would (git rev-parse:
    // cheap, no network, no worktree), every bad one with its line:column and the closest
    // name (issue 54). Only when repo: is a checkout's top (it holds .git): a shipped example
    // that points into a folder of another tree, or at a repository a demo makes first,
    // validates as before, and plan and run resolve its refs.
    if (!matrix.repo.empty()) {
      std::error_code ec;
      const auto repo = matrix_repo_path(matrix);
      if (std::filesystem::exists(repo / ".git", ec)) resolve_matrix_commits(matrix);
    }
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
