// A matrix resolved once: read and checked, its refs turned into commits, its branch-tree
// experiments read, and expanded into cells whose ids are final. `plan`, `submit` and
// `run` all start here; nothing changes a cell afterwards.
//
// Note [Resolve once]
// ~~~~~~~~~~~~~~~~~~~
// A cell's id hashes every identity field, the commit included (Note [Cell identity]), so
// an id is only meaningful once the commit is known. resolve_matrix therefore finds the
// commits first and then expands the matrix with them: each CellSpec is built complete and
// its id is computed once. The result hands out only const access, so no caller can change
// a field behind its id (the earlier pipeline set commits after expansion and recomputed
// ids in place, in three commands).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "matrix/git_repo.h"
#include "matrix/matrix.h"

namespace scalebench {

/// How the refs become commits.
struct ResolveOptions {
  MatrixLimits limits;
  /// Empty: read-only resolution (`git rev-parse`; plan, submit). Otherwise each commit is
  /// checked out as a worktree below this folder (run; see docs/branches.md).
  std::filesystem::path work_dir;
};

class ResolvedMatrix {
 public:
  /// What the file says, with `cells` final (ids set, commits set) and
  /// `experiment_prepare` including the tree experiments' steps.
  [[nodiscard]] const ExpandedMatrix& matrix() const { return matrix_; }
  [[nodiscard]] const std::vector<CellSpec>& cells() const { return matrix_.cells; }
  /// Non-fatal findings of the file and of the tree experiment files.
  [[nodiscard]] const std::vector<std::string>& warnings() const { return matrix_.warnings; }
  /// ref -> branch; `worktree` (and the commit date) only when resolved with a work_dir.
  /// Empty when the matrix has no repo.
  [[nodiscard]] const std::map<std::string, ResolvedBranch>& branches() const { return branches_; }
  /// The cells' ids in matrix order.
  [[nodiscard]] std::vector<std::string> cell_ids() const;

 private:
  ResolvedMatrix(ExpandedMatrix matrix, std::map<std::string, ResolvedBranch> branches)
      : matrix_(std::move(matrix)), branches_(std::move(branches)) {}
  friend ResolvedMatrix resolve_matrix(const std::filesystem::path& path,
                                       const ResolveOptions& options);

  ExpandedMatrix matrix_;
  std::map<std::string, ResolvedBranch> branches_;
};

/// Loads and checks `path` (load_matrix: every problem of the file alone, before any git),
/// resolves its refs as `options` says, reads its tree experiments and expands it once.
/// Throws MatrixError (every problem, as load_matrix), InputError (a repo or ref that does
/// not resolve) or GitError; nothing has run when it does. See Note [Resolve once].
ResolvedMatrix resolve_matrix(const std::filesystem::path& path, const ResolveOptions& options);

}  // namespace scalebench
