// Options of `scalebench run` (the worker-side dependencies are protocol/worker_factory.h).
//
// Every option of the run command is defined here once, with its default; the CLI
// (command_run.cc) only fills this struct. See docs/user-guide.md#scalebench-run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/base/logging.h"

namespace scalebench {

/// How cells share the workers. See Note [Scheduling] in orchestrator/scheduler.h.
enum class SchedulingMode {
  kExclusive,  ///< one cell at a time on the whole allocation (clean numbers; default)
  kPacked,     ///< as many cells at once as free workers allow (fast sweeps)
};

std::string to_string(SchedulingMode mode);
/// "exclusive" / "packed"; std::nullopt for anything else.
std::optional<SchedulingMode> parse_scheduling_mode(const std::string& text);

/// What `scalebench run` was asked to do (the user's request, before any file is read).
struct RunOptions {
  std::filesystem::path matrix_path;
  std::filesystem::path output_path;  ///< -o/--output (required)
  bool force = false;                 ///< --force: replace an existing results file
  bool resume = false;        ///< --resume: continue an existing file (or create it if absent)
  bool retry_failed = false;  ///< --retry-failed: with --resume, re-run failed/oom/timeout cells
  bool fail_fast = false;     ///< --fail-fast: stop dispatching after the first non-ok cell
  /// false: --no-preflight, the program cells' configurations are not checked before the
  /// first cell (Note [Program preflight] in program/preflight/program_preflight.h).
  bool preflight = true;
  std::optional<SchedulingMode> scheduling;  ///< --scheduling; nullopt = the matrix's setting
  /// --order-seed: seed of the interleaved repetitions' order (orchestrator/dispatch_order.h);
  /// nullopt = default_order_seed of the matrix hash.
  std::optional<uint64_t> order_seed;
  std::filesystem::path log_dir;  ///< --log-dir; empty = "<output>.logs"
  /// --work-dir: where the branches' worktrees live (see docs/branches.md); empty =
  /// "<output>.work".
  std::filesystem::path work_dir;
  Verbosity verbosity = Verbosity::kNormal;  ///< --verbose / --quiet (rank 0's console)
  /// Slack the rank-0 watchdog adds to a cell's timeout_s before it declares the cell hung
  /// (worker-side timeouts fire first; this is the backstop). --watchdog-grace.
  double watchdog_grace_s = 5.0;
  /// Seconds past that watchdog deadline during which rank 0 still waits for a late cell's
  /// ranks (a rank computing a long iteration) before it declares them hung and ends the
  /// job. See Note [Late cells] in orchestrator/orchestrator.h. --hang-limit.
  double hang_limit_s = 300.0;
  std::vector<std::string> argv;  ///< the full command line (provenance)

  /// log_dir, or "<output>.logs" when it is empty.
  [[nodiscard]] std::filesystem::path effective_log_dir() const;
  /// work_dir, or default_work_dir(output_path) ("<output>.work") when it is empty.
  [[nodiscard]] std::filesystem::path effective_work_dir() const;
};

}  // namespace scalebench
