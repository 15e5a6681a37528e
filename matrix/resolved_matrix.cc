// The one resolve step of plan, submit and run. See matrix/resolved_matrix.h.
#include "matrix/resolved_matrix.h"

#include <algorithm>

#include "common/base/diagnostics.h"
#include "matrix/branch_resolution.h"
#include "matrix/request.h"
#include "matrix/tree_experiments.h"

namespace scalebench {
namespace {

/// Read-only resolution: ref -> branch with only `ref` and `commit` set.
std::map<std::string, ResolvedBranch> read_only_branches(const ExpandedMatrix& matrix) {
  std::map<std::string, ResolvedBranch> branches;
  for (const auto& [ref, commit] : resolve_matrix_commits(matrix)) {
    ResolvedBranch branch;
    branch.ref = ref;
    branch.commit = commit;
    branches.emplace(ref, std::move(branch));
  }
  return branches;
}

}  // namespace

std::vector<std::string> ResolvedMatrix::cell_ids() const {
  std::vector<std::string> ids;
  ids.reserve(matrix_.cells.size());
  for (const auto& cell : matrix_.cells) ids.push_back(cell.cell_id);
  return ids;
}

ResolvedMatrix resolve_matrix(const std::filesystem::path& path, const ResolveOptions& options) {
  ExpandedMatrix matrix = load_matrix(path, options.limits);
  auto branches = options.work_dir.empty() ? read_only_branches(matrix)
                                           : checkout_matrix_branches(matrix, options.work_dir);
  const auto commits = commits_of(branches);
  std::map<std::string, PrepareSpec> tree_prepare;
  const MatrixRequest request = resolve_tree_experiments(matrix, commits, tree_prepare);
  Diagnostics diagnostics;
  std::vector<CellSpec> cells = expand_matrix(request, options.limits, commits, diagnostics);
  if (!diagnostics.has_errors() && cells.empty()) {
    diagnostics.error({request.file, 0, 0, ""},
                      "the matrix expands to no cells; check the exclude rules");
  }
  if (diagnostics.has_errors()) throw MatrixError(diagnostics.error_text());
  matrix.cells = std::move(cells);
  for (auto& [name, step] : tree_prepare) matrix.experiment_prepare[name] = std::move(step);
  if (!matrix.tree_experiments.empty()) {
    matrix.tree_experiments_resolved = true;
    for (const auto& warning : diagnostics.warning_lines()) {
      if (std::find(matrix.warnings.begin(), matrix.warnings.end(), warning) ==
          matrix.warnings.end())
        matrix.warnings.push_back(warning);
    }
  }
  return ResolvedMatrix(std::move(matrix), std::move(branches));
}

}  // namespace scalebench
