#include "matrix/branch_prepare.h"

#include <cerrno>
#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>

#include "common/base/subprocess.h"

namespace scalebench {
namespace {

std::string utc_now_iso() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

void append_to_log(const std::filesystem::path& log_path, const std::string& text) {
  std::error_code ec;
  if (log_path.has_parent_path()) std::filesystem::create_directories(log_path.parent_path(), ec);
  std::ofstream log(log_path, std::ios::app | std::ios::binary);
  log << text;
  log.flush();
  if (!log) {
    throw SubprocessError("cannot write the prepare log '" + log_path.string() + "'", errno);
  }
}

std::string failure_reason(const std::string& command, const std::filesystem::path& worktree,
                           const std::string& status, const PrepareOutcome& outcome) {
  std::ostringstream out;
  out << "prepare step `" << command << "` in " << worktree.string() << " failed: " << status
      << " (log: " << outcome.log_path.string() << ")";
  if (outcome.output_tail.empty()) {
    out << "; it printed nothing";
  } else {
    out << "; last output:\n" << outcome.output_tail;
  }
  return out.str();
}

}  // namespace

PrepareOutcome run_prepare(
    const std::vector<std::string>& argv, const std::filesystem::path& worktree, double timeout_s,
    const std::filesystem::path& log_path,
    const std::vector<std::pair<std::string, std::string>>& extra_environment) {
  if (argv.empty() || argv.front().empty())
    throw InputError(
        "prepare: empty argument vector; give the program and its arguments as a "
        "list, e.g. prepare: [python, scripts/export.py]");
  if (!(timeout_s > 0.0))
    throw InputError("prepare " + quote_argv(argv) + ": the timeout must be > 0 seconds");
  const std::string command = quote_argv(argv);
  PrepareOutcome outcome;
  outcome.log_path = log_path;
  append_to_log(log_path, "==== prepare " + utc_now_iso() + " in " + worktree.string() + "\n$ " +
                              command + "\n");

  SubprocessOptions options;
  options.argv = argv;
  options.working_dir = worktree;
  options.set_environment = extra_environment;
  options.timeout_s = timeout_s;
  options.kill_grace_s = kPrepareKillGraceS;
  options.log_path = log_path;
  std::string status;
  try {
    const SubprocessResult result = run_subprocess(std::move(options));
    outcome.exit_status = result.shell_status();
    outcome.timed_out = result.timed_out;
    outcome.wall_s = result.wall_s;
    outcome.output_tail = tail_lines(result.output, kPrepareTailLines, kPrepareTailBytes);
    std::ostringstream text;
    text << result.describe(timeout_s) << " after " << result.wall_s << " s";
    status = text.str();
  } catch (const SubprocessError& e) {  // could not start: shell convention 127 / 126
    outcome.exit_status = e.error_number() == ENOENT ? 127 : 126;
    outcome.output_tail = e.what();
    status = "could not start (exit status " + std::to_string(outcome.exit_status) + ")";
    append_to_log(log_path, std::string(e.what()) + "\n");
  }
  append_to_log(log_path, "==== " + status + "\n");
  if (!outcome.ok()) outcome.reason = failure_reason(command, worktree, status, outcome);
  return outcome;
}

void throw_if_failed(const PrepareOutcome& outcome) {
  if (!outcome.ok()) throw PrepareError(outcome);
}

}  // namespace scalebench
