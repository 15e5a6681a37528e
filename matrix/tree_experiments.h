// Experiments read from the branch trees: an entry `{experiment: <name>, ...overrides}` of a
// YAML matrix's `experiments` names the file configs/experiment/<name>.yaml (the CytoDL
// layout) inside each branch's commit. The file holds one experiment mapping, checked by the
// same schema (experiment.schema.json) and reader as an inline entry; the entry's other keys
// override the file's. Because the file may differ per branch, each branch's cells of such an
// experiment come from that branch's file.
//
// Contract: `load_matrix` runs no git; it checks the entries (name, overrides, repo/branches)
// and leaves their cells out (ExpandedMatrix::tree_experiments lists them). Once the refs are
// resolved to commits, resolve_matrix (matrix/resolved_matrix.h; plan, submit and run) has
// resolve_tree_experiments read the files with read-only git (`git show <commit>:<path>`,
// no worktree) and then expands the whole matrix once. Problems throw MatrixError (an InputError:
// exit status 2) listing all of them, with
// "<ref>:configs/experiment/<name>.yaml:line:column" for problems inside a file; nothing has
// run when it does. See docs/matrix-reference.md#experiments-from-the-branch-tree.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "matrix/matrix.h"
#include "matrix/request.h"

namespace scalebench {

/// Folder of the experiment files inside a branch's tree.
inline constexpr const char* kTreeExperimentDir = "configs/experiment";

/// Why scalebench refuses `name` as the <name> of configs/experiment/<name>.yaml ("" when
/// accepted). Pure. Accepted: '/'-separated parts of ASCII letters, digits and `_ . + -`,
/// no part empty or starting with '.', no `..`, not ending in .yaml/.yml, at most 200 bytes.
std::string tree_experiment_name_problem(const std::string& name);

/// "configs/experiment/<name>.yaml".
std::string tree_experiment_path(const std::string& name);

/// `matrix`'s request with each tree experiment entry replaced by one experiment per branch,
/// read from configs/experiment/<name>.yaml at that branch's commit (`commits_by_ref`: ref ->
/// full commit id) and merged with the entry's overrides, in file order and branch order.
/// Each merged experiment has passed the semantic checks of expansion on its own; the
/// caller (resolve_matrix) expands the result once. Tree experiments' prepare steps go to
/// `tree_prepare`. Returns the request unchanged when it has no tree experiments. Throws
/// MatrixError listing every problem; Error when a branch is missing from `commits_by_ref`
/// (a bug); GitError when git fails for a reason other than the input.
MatrixRequest resolve_tree_experiments(const ExpandedMatrix& matrix,
                                       const std::map<std::string, std::string>& commits_by_ref,
                                       std::map<std::string, PrepareSpec>& tree_prepare);

}  // namespace scalebench
