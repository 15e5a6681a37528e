// `scalebench analyze|compare|report|trace|watch|history ...`: hands every argument to the Python
// analysis package (analysis/, `python -m scalebench_analysis <command> <args...>`) and returns its
// exit status. See docs/analysis-guide.md.
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/base/build_info.h"
#include "common/base/error.h"
#include "orchestrator/commands.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not in a header

namespace scalebench {
namespace {

/// Environment variable that names the Python interpreter, overriding the build's
/// `SCALEBENCH_PYTHON` (build_info::kPython). Unit: a path, or a name looked up in PATH.
constexpr const char* kPythonEnvironmentVariable = "SCALEBENCH_PYTHON";

std::string python_interpreter() {
  const char* from_environment = std::getenv(kPythonEnvironmentVariable);
  if (from_environment != nullptr && *from_environment != '\0') return from_environment;
  if (*build_info::kPython != '\0') return build_info::kPython;
  throw InputError(
      "scalebench was built without a Python interpreter for the analysis commands: set "
      "SCALEBENCH_PYTHON=/path/to/.venv/bin/python, or reconfigure with "
      "-DSCALEBENCH_PYTHON=... (setup.sh does this)");
}

/// Runs argv (no shell) with this process's stdin, stdout, stderr and environment; waits.
/// Returns the child's exit status, or 128 + signal when a signal ended it. Uses
/// posix_spawn (fork + exec in one call) so that exec failures come back as errors.
int run_and_wait(const std::vector<std::string>& argv) {
  std::vector<char*> pointers;
  pointers.reserve(argv.size() + 1);
  for (const auto& arg : argv) pointers.push_back(const_cast<char*>(arg.c_str()));
  pointers.push_back(nullptr);
  pid_t pid = -1;
  const bool search_path = argv[0].find('/') == std::string::npos;
  const int rc =
      search_path ? posix_spawnp(&pid, argv[0].c_str(), nullptr, nullptr, pointers.data(), environ)
                  : posix_spawn(&pid, argv[0].c_str(), nullptr, nullptr, pointers.data(), environ);
  if (rc != 0) {
    throw InputError("cannot run the analysis interpreter '" + argv[0] + "': " + std::strerror(rc) +
                     " (set SCALEBENCH_PYTHON to the project venv's python)");
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(std::string("waitpid: ") + std::strerror(errno));
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : kExitInfrastructure;
}

void add_forwarding_command(CLI::App& app, int& exit_status, const std::string& name,
                            const std::string& description) {
  auto* command = app.add_subcommand(
      name, description + " (python -m scalebench_analysis " + name + " --help)");
  // Everything after the subcommand's name, --help included, belongs to Python's parser.
  command->prefix_command();
  command->allow_extras();
  command->set_help_flag();
  command->callback([command, name, &exit_status] {
    std::vector<std::string> argv = {python_interpreter(), "-m", "scalebench_analysis", name};
    for (const auto& arg : command->remaining()) argv.push_back(arg);
    exit_status = run_and_wait(argv);
  });
}

}  // namespace

void add_analyze_commands(CLI::App& app, int& exit_status) {
  // Each is `python -m scalebench_analysis <name>`; the help line says so.
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"analyze", "Tables of a results file: scaling, batch size, stragglers, speedups"},
      {"compare", "Regression gate between two results files; exit 1 on a significant regression"},
      {"report", "Self-contained HTML report with plots"},
      {"trace", "Per-rank timeline of a cell or a run as a Chrome/Perfetto trace"},
      {"watch", "Follow a running sweep from another terminal until it ends"},
      {"history", "Trend of the same cells across many results files, steps beyond noise flagged"},
  };
  for (const auto& [name, description] : commands) {
    add_forwarding_command(app, exit_status, name, description);
  }
}

}  // namespace scalebench
