// Each distinct program configuration checked once before any cell. See
// program/preflight/program_preflight.h, Note [Program preflight].
#include "program/preflight/program_preflight.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/base/subprocess.h"
#include "common/cell/program.h"

namespace scalebench {
namespace {

/// The environment of `cell`'s check, in the order Subprocess applies it.
std::vector<std::pair<std::string, std::string>> check_environment(
    const CellSpec& cell, const std::map<std::string, std::string>& values,
    const std::string& caller_path) {
  std::vector<std::pair<std::string, std::string>> environment{{"SCALEBENCH_PREFLIGHT", "1"},
                                                               {"CUDA_VISIBLE_DEVICES", ""}};
  if (const auto path = activated_path(cell.program, caller_path)) {
    environment.emplace_back("PATH", *path);
  }
  for (const auto& [name, value] : cell.program.env) {
    environment.emplace_back(name, substitute_placeholders(value, values));
  }
  return environment;
}

std::string format_seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", seconds);
  return text;
}

std::string indented(const std::string& text, const std::string& indent) {
  std::istringstream lines(text);
  std::string line;
  std::string out;
  while (std::getline(lines, line)) out += indent + line + "\n";
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

/// "tasks.csv:3 (experiment cnn, branch main)" or "m.yaml:7, m.yaml:9 (experiment cnn, 4 cells)".
std::string cells_of(const PreflightCheck& check) {
  std::string out = joined(check.sources) + " (experiment " + check.experiment;
  if (!check.branch.empty()) out += ", branch " + check.branch;
  if (check.cells > 1) out += ", " + std::to_string(check.cells) + " cells";
  return out + ")";
}

}  // namespace

std::vector<PreflightCheck> plan_preflight(const std::vector<CellSpec>& cells,
                                           const PreflightContext& context) {
  std::vector<PreflightCheck> checks;
  for (const auto& cell : cells) {
    if (cell.program.command.empty() || cell.program.preflight.kind == PreflightKind::kNone) {
      continue;
    }
    PreflightCheck check;
    try {
      const auto values = placeholder_values(cell, context.scratch_dir.string(),
                                             cell.device == Device::kCuda ? "cuda" : "cpu");
      check.argv = preflight_argv(cell.program, values);
      check.environment = check_environment(cell, values, context.caller_path);
    } catch (const std::invalid_argument& e) {
      throw InputError(cell.source + ": the preflight check of experiment " + cell.experiment +
                       " cannot be expanded: " + e.what() +
                       "; correct the program's command, env or preflight");
    }
    check.tree = context.tree_of(cell);
    check.timeout_s = cell.program.preflight.timeout_s;
    const auto same = std::find_if(checks.begin(), checks.end(), [&](const PreflightCheck& c) {
      return c.tree == check.tree && c.argv == check.argv && c.environment == check.environment;
    });
    if (same != checks.end()) {
      if (std::find(same->sources.begin(), same->sources.end(), cell.source) ==
          same->sources.end()) {
        same->sources.push_back(cell.source);
      }
      same->timeout_s = std::max(same->timeout_s, check.timeout_s);
      ++same->cells;
      continue;
    }
    check.sources = {cell.source};
    check.experiment = cell.experiment;
    check.branch = cell.branch;
    check.cells = 1;
    checks.push_back(std::move(check));
  }
  return checks;
}

PreflightOutcome run_preflight_check(const PreflightCheck& check) {
  SubprocessOptions options;
  options.argv = check.argv;
  options.working_dir = check.tree;
  options.set_environment = check.environment;
  options.unset_environment_prefixes = kLauncherEnvironmentPrefixes;
  options.timeout_s = check.timeout_s;
  options.separate_stderr = true;
  PreflightOutcome outcome;
  try {
    const SubprocessResult result = run_subprocess(options);
    outcome.ok = result.ok();
    outcome.timed_out = result.timed_out;
    outcome.status = result.describe(check.timeout_s);
    outcome.wall_s = result.wall_s;
    const std::string& text = result.error_output.empty() ? result.output : result.error_output;
    outcome.tail = tail_lines(text, kPreflightTailLines, kPreflightTailBytes);
    outcome.output = result.output + result.error_output;
  } catch (const SubprocessError& e) {  // not found, not executable, no such tree
    outcome.status = std::string("could not start: ") + e.what();
  }
  return outcome;
}

void append_preflight_log(const std::filesystem::path& log_path, const PreflightCheck& check,
                          const PreflightOutcome& outcome) {
  std::error_code error;
  std::filesystem::create_directories(log_path.parent_path(), error);
  std::ofstream log(log_path, std::ios::app);
  log << "==== preflight of " << joined(check.sources) << " in " << check.tree.string() << ": "
      << quote_argv(check.argv) << "\n"
      << outcome.output << (outcome.output.ends_with('\n') || outcome.output.empty() ? "" : "\n")
      << "==== " << (outcome.ok ? "passed" : "FAILED") << ": " << outcome.status << "\n";
}

size_t preflight_jobs(size_t checks, unsigned cores) {
  return std::clamp<size_t>(std::min<size_t>(checks, cores), 1, kPreflightMaxJobs);
}

std::string preflight_failure_text(const std::vector<PreflightCheck>& checks,
                                   const std::vector<PreflightOutcome>& outcomes,
                                   const std::string& skip_hint) {
  size_t failed = 0;
  bool timed_out = false;
  std::string paragraphs;
  for (size_t i = 0; i < checks.size() && i < outcomes.size(); ++i) {
    if (outcomes[i].ok) continue;
    ++failed;
    timed_out = timed_out || outcomes[i].timed_out;
    const PreflightCheck& check = checks[i];
    paragraphs += "\n" + cells_of(check) + ": " + outcomes[i].status + "\n";
    paragraphs += "  check: " + quote_argv(check.argv) + "\n";
    paragraphs += "  in: " + check.tree.string() + "\n";
    if (!outcomes[i].tail.empty()) {
      paragraphs += "  its output ends:\n" + indented(outcomes[i].tail, "    ");
    }
  }
  if (failed == 0) return "";
  std::string text = "preflight: " + std::to_string(failed) + " of " +
                     std::to_string(checks.size()) + " program configuration" +
                     (checks.size() == 1 ? "" : "s") +
                     " failed its check; no cell has run. Each check composes a cell's "
                     "configuration and exits without training (docs/programs.md#preflight):\n" +
                     paragraphs;
  text +=
      "\nWhat to change: correct the row or experiment named above (its overrides, the "
      "experiment or config it names, the program's command or env), or the config files "
      "on its branch";
  if (timed_out) text += "; for a check that timed out, raise program.preflight_timeout_s";
  return text + "; " + skip_hint + ".";
}

std::string preflight_summary(const std::vector<PreflightCheck>& checks,
                              const std::vector<PreflightOutcome>& outcomes, double elapsed_s,
                              size_t jobs) {
  if (checks.empty()) return "";
  size_t cells = 0;
  for (const auto& check : checks) cells += check.cells;
  double wall_s = 0;
  size_t passed = 0;
  for (const auto& outcome : outcomes) {
    wall_s += outcome.wall_s;
    if (outcome.ok) ++passed;
  }
  const size_t n = checks.size();
  return "preflight: " + std::to_string(passed) + " of " + std::to_string(n) + " configuration" +
         (n == 1 ? "" : "s") + " of " + std::to_string(cells) + " program cell" +
         (cells == 1 ? "" : "s") + " passed in " + format_seconds(elapsed_s) + " (" +
         format_seconds(wall_s / static_cast<double>(n)) + " each, " + std::to_string(jobs) +
         " at a time)";
}

std::string preflight_program_cells(const std::vector<CellSpec>& cells,
                                    const PreflightContext& context,
                                    const std::filesystem::path& log_path,
                                    const std::string& skip_hint,
                                    const std::function<void(const std::string&)>& note) {
  const auto checks = plan_preflight(cells, context);
  if (checks.empty()) return "";
  std::vector<PreflightOutcome> outcomes(checks.size());
  const size_t jobs = preflight_jobs(checks.size(), std::thread::hardware_concurrency());
  std::atomic<size_t> next{0};
  std::mutex reporting;  // note and the log: one check's lines at a time
  const auto work = [&] {
    for (size_t i = next++; i < checks.size(); i = next++) {
      {
        const std::lock_guard<std::mutex> lock(reporting);
        note("preflight " + std::to_string(i + 1) + "/" + std::to_string(checks.size()) + ": " +
             cells_of(checks[i]) + ": " + quote_argv(checks[i].argv));
      }
      outcomes[i] = run_preflight_check(checks[i]);
      if (!log_path.empty()) {
        const std::lock_guard<std::mutex> lock(reporting);
        append_preflight_log(log_path, checks[i], outcomes[i]);
      }
    }
  };
  const auto started = std::chrono::steady_clock::now();
  {
    std::vector<std::jthread> workers;
    for (size_t j = 1; j < jobs; ++j) workers.emplace_back(work);
    work();
  }  // the jthreads join here
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (const auto text = preflight_failure_text(checks, outcomes, skip_hint); !text.empty()) {
    throw PreflightError(text);
  }
  return preflight_summary(checks, outcomes, elapsed_s, jobs);
}

}  // namespace scalebench
