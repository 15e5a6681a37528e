// Rank 0 of `scalebench run`: the matrix's `prepare:` steps, run once per branch (and per
// distinct step, when experiments set their own) in the branch's worktree before any of
// the branch's cells is dispatched. See docs/branches.md#prepare.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "matrix/git_repo.h"
#include "matrix/matrix.h"
#include "orchestrator/orchestrator.h"

namespace scalebench {

/// The log file of `ref`'s prepare steps inside `log_dir`: "prepare-<ref>.log", with every
/// '/' of the ref written as '_' (refs are checked by check_ref_syntax, so nothing else
/// needs escaping).
std::filesystem::path prepare_log_path(const std::filesystem::path& log_dir,
                                       const std::string& ref);

/// What run_prepare_steps left to run.
struct PrepareStepsOutcome {
  std::vector<CellSpec> to_run;  ///< the cells whose prepare step succeeded or that have none
  size_t failed_cells = 0;       ///< cells recorded `failed` in phase `prepare`
};

/// For each ref of `matrix.branches` (in order) and each distinct prepare step of its cells
/// in `to_run` (see prepare_of): run_prepare(step.argv, worktree, step.timeout_s,
/// prepare_log_path(log_dir, ref), {SCALEBENCH_BRANCH=ref, SCALEBENCH_COMMIT=commit}).
/// A failed step records each of its cells through `sink.finish_without_results(cell,
/// failed, "prepare", outcome.reason)` and drops them; the other branches go on. Branches
/// without cells to run are not prepared. Throws SubprocessError when a log cannot be
/// written (infrastructure), Error when a branch of a cell is missing from `branches`.
PrepareStepsOutcome run_prepare_steps(const ExpandedMatrix& matrix,
                                      const std::map<std::string, ResolvedBranch>& branches,
                                      std::vector<CellSpec> to_run,
                                      const std::filesystem::path& log_dir, ResultSink& sink);

}  // namespace scalebench
