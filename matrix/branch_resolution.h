// The `repo:` / `branches:` axis of a loaded matrix, resolved before any cell id is computed:
// each ref becomes a commit (and, for `scalebench run`, a worktree). resolve_matrix
// (matrix/resolved_matrix.h) uses these; see Note [Resolve once].
//
// Contract: only rank 0 calls these, one at a time (see matrix/git_repo.h). Resolution
// errors (repo missing, a ref that names no commit) throw InputError naming the matrix file
// and `branches[i]`; nothing has run yet when they do. See docs/branches.md.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "common/base/diagnostics.h"
#include "matrix/git_repo.h"
#include "matrix/matrix.h"

namespace scalebench {

/// The matrix's `repo` as a local path: absolute as written, or relative to the folder of
/// the matrix file. Throws InputError for a URL (scalebench does not clone: clone it and
/// write the clone's path). Empty when the matrix has no repo.
std::filesystem::path matrix_repo_path(const ExpandedMatrix& matrix);

/// `--work-dir`'s default: "<output>.work" (a sibling of the results file).
std::filesystem::path default_work_dir(const std::filesystem::path& output_path);

/// Read-only (`scalebench plan`): resolves each ref of `matrix.branches` with resolve_ref.
/// Returns ref -> full commit id. Empty when the matrix has no repo.
std::map<std::string, std::string> resolve_matrix_commits(const ExpandedMatrix& matrix);

/// Note [Refs beside file errors]: a matrix file with errors of its own (a schema error, an
/// unknown placeholder) stops load_matrix before any ref is resolved, so a misspelt branch
/// would be reported only once those are fixed: two passes where one would do (issue 54
/// row 8). When `text` (a YAML matrix at `path`) has errors, its `repo:` and `branches:` are
/// read leniently (the YAML parsed, nothing else checked) and, where repo: is a checkout's
/// top folder (it holds .git, as validate requires: docs/branches.md), every ref that names
/// no commit is added to `diagnostics` at its line:column with the closest name, as
/// resolve_matrix_commits says it. Anything the lenient read cannot make sense of adds
/// nothing: the file's own errors say what is wrong there.
void add_ref_errors_beside_file_errors(const std::filesystem::path& path, const std::string& text,
                                       Diagnostics& diagnostics);

/// `scalebench run`: checkout_branch of each ref (once) into `work_dir`. Returns ref ->
/// ResolvedBranch. Empty when the matrix has no repo.
std::map<std::string, ResolvedBranch> checkout_matrix_branches(
    const ExpandedMatrix& matrix, const std::filesystem::path& work_dir);

/// ref -> commit of checkout_matrix_branches' result.
std::map<std::string, std::string> commits_of(
    const std::map<std::string, ResolvedBranch>& branches);

}  // namespace scalebench
