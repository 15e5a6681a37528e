// Rank 0 of `scalebench run` (and `scalebench validate --preflight`): each distinct
// configuration of the matrix's program cells checked once before any cell runs.
//
// Note [Program preflight]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A typo in a Hydra override or an experiment that does not exist fails a program only when
// it starts: in every cell, after the sweep has begun, each time at the cost of a training
// start. A program's `preflight:` (docs/programs.md#preflight) names a check that composes
// the configuration and exits without training:
//  * `hydra`: the cell's own command with `--cfg job` appended. Hydra composes the config
//    with the overrides, prints it and exits before calling the task function: the cost is
//    the script's imports and one composition (no trainer, no data, no process group).
//  * an argv template of the user's own (placeholders as in `command`), exiting 0 when the
//    configuration is good;
//  * `none` (the default): nothing; a plain script has no compose-only mode.
// plan_preflight expands each cell's check as the cell's rank 0 of a one-host group would be
// launched (placeholder_values; `{device}` is cpu unless the cell asks for cuda;
// `{output_dir}` is one scratch folder, the same for every check) and keeps one check per
// distinct (tree, argv, environment): a sweep over world sizes and batch sizes has as many
// configurations as distinct command lines, and the cells of one CSV row or experiment that
// expand to the same command share one check. Each check runs once, in its cell's tree (the
// branch's worktree), with the cell's `env` and `python:` on PATH, the launcher's variables
// removed, no GPU (CUDA_VISIBLE_DEVICES empty) and SCALEBENCH_PREFLIGHT=1, for at most
// `preflight_timeout_s`, up to one per core of rank 0's host at a time (at most 8: no cell
// runs yet, and the check's cost is mostly one interpreter's imports, CPU-bound). A check that
// exits non-zero, is killed or times out fails the run before any cell with one paragraph per
// failed configuration: the `file:line` of every cell using it (the CSV rows, the experiment's
// line), the check as run, where, and the end of its stderr (Hydra's own message), then what to
// change. Where: `run` checks after the worktrees are checked out and before the results file is
// created, so a failed check leaves nothing to --force or --resume (exit status 2, bad
// input); this is before the prepare steps, which record their failures in that file: a
// check that needs what a prepare step makes must be `none` (or run with --no-preflight).
// `validate --preflight` checks out the worktrees the same way (Note [Validate preflight
// worktrees] in command_validate.cc). Rejected: checking each configuration inside the
// first cell that uses it (the sweep has begun, and a results file exists); composing with
// Hydra's compose API in one interpreter for all configurations (faster, but it needs the
// script's config path and name without running the script, and would miss what the
// script's imports register: structured configs, resolvers).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/base/error.h"
#include "common/cell/cell_spec.h"

namespace scalebench {

/// One distinct configuration's check and the cells that share it.
struct PreflightCheck {
  std::vector<std::string> argv;  ///< as run (placeholders filled)
  std::filesystem::path tree;     ///< working directory: the cells' tree
  /// Set on top of the caller's environment (which loses kLauncherEnvironmentPrefixes);
  /// the later of two entries of one name wins.
  std::vector<std::pair<std::string, std::string>> environment;
  double timeout_s = 60.0;
  std::vector<std::string> sources;  ///< distinct `file:line` of its cells, in matrix order
  std::string experiment;            ///< its first cell's
  std::string branch;                ///< its first cell's ("" without a repo)
  size_t cells = 0;                  ///< how many cells share it
};

/// What plan_preflight needs besides the cells.
struct PreflightContext {
  /// The tree a cell runs in: its branch's worktree, or the matrix file's folder.
  std::function<std::filesystem::path(const CellSpec&)> tree_of;
  std::filesystem::path scratch_dir;  ///< `{output_dir}` of every check
  std::string caller_path;            ///< this process's PATH (for `python:`)
};

/// The distinct checks of `cells` (program cells whose preflight is not none), in the order
/// of their first cell. Pure apart from context.tree_of. Throws InputError naming the cell's
/// `file:line` when a placeholder cannot be filled.
std::vector<PreflightCheck> plan_preflight(const std::vector<CellSpec>& cells,
                                           const PreflightContext& context);

/// How one check ended.
struct PreflightOutcome {
  bool ok = false;
  bool timed_out = false;
  std::string status;  ///< "exit status 1", "timed out after 60 s; ...", "could not start: ..."
  std::string tail;    ///< the end of its stderr (of its stdout when stderr is empty)
  std::string output;  ///< stdout, then stderr (each tail-limited by Subprocess), for the log
  double wall_s = 0.0;
};

/// Lines and bytes of a failed check's output kept in PreflightOutcome::tail.
inline constexpr std::size_t kPreflightTailLines = 20;
inline constexpr std::size_t kPreflightTailBytes = 3000;

/// Most checks run at once (each is a Python start: imports of a few hundred MiB).
inline constexpr std::size_t kPreflightMaxJobs = 8;

/// How many checks run at once: one per core, at most kPreflightMaxJobs, at least 1. Pure.
size_t preflight_jobs(size_t checks, unsigned cores);

/// Runs `check` (Subprocess: its own process group, killed past timeout_s). Never throws for
/// a check that fails or cannot start: the outcome says so. Thread-safe (one child each).
PreflightOutcome run_preflight_check(const PreflightCheck& check);

/// Appends `check`'s command, output and status to `log_path` (created with its folder);
/// a log that cannot be written is skipped.
void append_preflight_log(const std::filesystem::path& log_path, const PreflightCheck& check,
                          const PreflightOutcome& outcome);

/// The error text of the failed checks (outcomes[i] is checks[i]'s); "" when all passed.
/// `skip_hint` ends it: how to run without the check. Pure.
std::string preflight_failure_text(const std::vector<PreflightCheck>& checks,
                                   const std::vector<PreflightOutcome>& outcomes,
                                   const std::string& skip_hint);

/// "preflight: 3 of 3 configurations of 8 program cells passed in 4.2 s (2.8 s each, 2 at a
/// time)": `elapsed_s` the checks' wall time together, `jobs` as preflight_jobs. Pure.
std::string preflight_summary(const std::vector<PreflightCheck>& checks,
                              const std::vector<PreflightOutcome>& outcomes, double elapsed_s,
                              size_t jobs);

/// A configuration failed its check: nothing has run.
class PreflightError : public InputError {
 public:
  using InputError::InputError;
};

/// plan_preflight, then every check, preflight_jobs of them at a time (`note` gets one line
/// as each starts, never two calls at once; each check's output is appended to `log_path`
/// when it is not empty); throws PreflightError(preflight_failure_text(...)) after running
/// every check when one failed. Returns the summary ("" when no cell has a check).
std::string preflight_program_cells(const std::vector<CellSpec>& cells,
                                    const PreflightContext& context,
                                    const std::filesystem::path& log_path,
                                    const std::string& skip_hint,
                                    const std::function<void(const std::string&)>& note);

}  // namespace scalebench
