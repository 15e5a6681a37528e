// Experiments read from the branch trees: an entry `{experiment: <name>, ...overrides}` of a
// YAML matrix's `experiments` names the file configs/experiment/<name>.yaml (the CytoDL
// layout) inside each branch's commit. The file holds one experiment mapping, checked by the
// same schema (experiment.schema.json) and reader as an inline entry; the entry's other keys
// override the file's. Because the file may differ per branch, each branch's cells of such an
// experiment come from that branch's file.
//
// Contract: `load_matrix` runs no git; it checks the entries (name, overrides, repo/branches)
// and leaves their cells out (ExpandedMatrix::tree_experiments lists them). Once the refs are
// resolved to commits (rank 0, `plan` and `run`), resolve_tree_experiments reads the files
// with read-only git (`git show <commit>:<path>`, no worktree) and expands the whole matrix
// again. Problems throw MatrixError (an InputError: exit status 2) listing all of them, with
// "<ref>:configs/experiment/<name>.yaml:line:column" for problems inside a file; nothing has
// run when it does. See docs/matrix-reference.md#experiments-from-the-branch-tree.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/matrix.h"

namespace scalebench {

/// Folder of the experiment files inside a branch's tree.
inline constexpr const char* kTreeExperimentDir = "configs/experiment";

/// Why scalebench refuses `name` as the <name> of configs/experiment/<name>.yaml ("" when
/// accepted). Pure. Accepted: '/'-separated parts of ASCII letters, digits and `_ . + -`,
/// no part empty or starting with '.', no `..`, not ending in .yaml/.yml, at most 200 bytes.
std::string tree_experiment_name_problem(const std::string& name);

/// "configs/experiment/<name>.yaml".
std::string tree_experiment_path(const std::string& name);

/// Reads every tree experiment's file at each branch's commit (`commits_by_ref`: ref ->
/// full commit id, as resolve_matrix_commits or commits_of return it) and re-expands
/// `matrix` from its request: `cells` becomes every cell (inline experiments as before, then
/// each tree experiment per branch, in file order and branch order), excludes, limits and
/// duplicate checks applied, each cell's `commit` set and its id finalized (as
/// apply_commits does; calling it before or after apply_commits gives the same cells).
/// Tree experiments' prepare steps go to `experiment_prepare`. Appends the warnings found
/// now (exclude rules that match no cell) to `matrix.warnings` and returns them. Does
/// nothing and returns {} when the matrix has no tree experiments. Throws MatrixError
/// listing every problem; Error when a branch is missing from `commits_by_ref` (a bug);
/// GitError when git fails for a reason other than the input.
std::vector<std::string> resolve_tree_experiments(
    ExpandedMatrix& matrix, const std::map<std::string, std::string>& commits_by_ref);

}  // namespace scalebench
