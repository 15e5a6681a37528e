// A branch's `prepare:` step: one argument vector run once per branch inside its worktree
// (e.g. a Python script that exports the branch's model), before any of its cells runs.
//
// Contract:
//  * No shell: argv[0] is looked up in PATH (or, when it contains a '/', taken relative to
//    the worktree), the other elements reach it verbatim.
//  * It runs with the worktree as working directory, stdin = /dev/null, the caller's
//    environment plus `extra_environment`, in its own process group.
//  * Everything it prints (stdout and stderr, interleaved as written) is appended to
//    `log_path`, framed by a header (time, directory, command) and a footer (status, time).
//  * Past `timeout_s` its process group gets SIGTERM, and SIGKILL kPrepareKillGraceS later;
//    children it started in its group are killed with it.
//  * run_prepare never throws for a program that fails, cannot be started, or times out:
//    the outcome says so, and the caller marks that branch's cells failed with
//    `outcome.reason`. It throws InputError only for an empty argv or timeout_s <= 0, and
//    SubprocessError when the log file cannot be written.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/base/error.h"

namespace scalebench {

/// Seconds between SIGTERM and SIGKILL when a prepare step times out.
inline constexpr double kPrepareKillGraceS = 5.0;

/// Lines and bytes of the end of the output kept in PrepareOutcome::output_tail.
inline constexpr std::size_t kPrepareTailLines = 40;
inline constexpr std::size_t kPrepareTailBytes = 4096;

struct PrepareOutcome {
  /// Shell convention: the exit code; 128 + N when ended by signal N; 127 when the program
  /// was not found, 126 when it could not be started for another reason.
  int exit_status = -1;
  bool timed_out = false;
  std::string output_tail;  ///< last kPrepareTailLines lines / kPrepareTailBytes bytes
  std::filesystem::path log_path;
  double wall_s = 0.0;
  /// "" when ok(); otherwise one paragraph for the failed cells' error text: the command,
  /// the directory, the status (or timeout), the log path, and the output tail.
  std::string reason;

  [[nodiscard]] bool ok() const { return exit_status == 0 && !timed_out; }
};

/// A failed prepare step as an exception, for callers that prefer throwing: a CellError of
/// phase "prepare" whose what() is PrepareOutcome::reason.
class PrepareError : public CellError {
 public:
  explicit PrepareError(PrepareOutcome outcome)
      : CellError(FailurePhase::kPrepare, outcome.reason), outcome_(std::move(outcome)) {}
  [[nodiscard]] const PrepareOutcome& outcome() const { return outcome_; }

 private:
  PrepareOutcome outcome_;
};

/// Runs `argv` in `worktree` with a timeout; see the contract above.
PrepareOutcome run_prepare(
    const std::vector<std::string>& argv, const std::filesystem::path& worktree, double timeout_s,
    const std::filesystem::path& log_path,
    const std::vector<std::pair<std::string, std::string>>& extra_environment = {});

/// Throws PrepareError(outcome) unless outcome.ok().
void throw_if_failed(const PrepareOutcome& outcome);

}  // namespace scalebench
