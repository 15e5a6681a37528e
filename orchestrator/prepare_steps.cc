// The matrix's prepare steps on rank 0. See orchestrator/prepare_steps.h.
#include "orchestrator/prepare_steps.h"

#include <algorithm>

#include "common/base/logging.h"
#include "common/base/subprocess.h"
#include "matrix/branch_prepare.h"

namespace scalebench {
namespace {

/// The distinct non-empty prepare steps of `ref`'s cells, in the order of their first cell.
std::vector<PrepareSpec> steps_of(const ExpandedMatrix& matrix, const std::vector<CellSpec>& cells,
                                  const std::string& ref) {
  std::vector<PrepareSpec> steps;
  for (const auto& cell : cells) {
    if (cell.branch != ref) continue;
    const PrepareSpec& step = prepare_of(matrix, cell);
    if (!step.argv.empty() && std::find(steps.begin(), steps.end(), step) == steps.end()) {
      steps.push_back(step);
    }
  }
  return steps;
}

}  // namespace

std::filesystem::path prepare_log_path(const std::filesystem::path& log_dir,
                                       const std::string& ref) {
  std::string name = ref;
  std::replace(name.begin(), name.end(), '/', '_');
  return log_dir / ("prepare-" + name + ".log");
}

PrepareStepsOutcome run_prepare_steps(const ExpandedMatrix& matrix,
                                      const std::map<std::string, ResolvedBranch>& branches,
                                      std::vector<CellSpec> to_run,
                                      const std::filesystem::path& log_dir, ResultSink& sink) {
  PrepareStepsOutcome outcome;
  for (const auto& ref : matrix.branches) {
    for (const auto& step : steps_of(matrix, to_run, ref)) {
      const auto branch = branches.find(ref);
      if (branch == branches.end()) throw Error("branch '" + ref + "' has no worktree");
      const auto log_path = prepare_log_path(log_dir, ref);
      SB_LOG(info) << "prepare " << ref << ": " << quote_argv(step.argv) << " (log "
                   << log_path.string() << ")";
      const PrepareOutcome result =
          run_prepare(step.argv, branch->second.worktree, step.timeout_s, log_path,
                      {{"SCALEBENCH_BRANCH", ref}, {"SCALEBENCH_COMMIT", branch->second.commit}});
      if (result.ok()) continue;
      SB_LOG(warning) << "prepare of branch " << ref << " failed; its cells are recorded as "
                      << "failed: " << result.reason;
      const auto failed = [&](const CellSpec& cell) {
        return cell.branch == ref && prepare_of(matrix, cell) == step;
      };
      for (const auto& cell : to_run) {
        if (!failed(cell)) continue;
        sink.finish_without_results(cell, CellStatus::kFailed, FailurePhase::kPrepare,
                                    result.reason);
        ++outcome.failed_cells;
      }
      to_run.erase(std::remove_if(to_run.begin(), to_run.end(), failed), to_run.end());
    }
  }
  outcome.to_run = std::move(to_run);
  return outcome;
}

}  // namespace scalebench
