#include "orchestrator/analysis_process.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/base/build_info.h"
#include "common/base/error.h"
#include "common/base/exit_status.h"
#include "common/base/subprocess.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not in a header

namespace scalebench {
namespace {

/// Environment variable that names the Python interpreter, overriding the build's
/// `SCALEBENCH_PYTHON` (build_info::kPython). Unit: a path, or a name looked up in PATH.
constexpr const char* kPythonEnvironmentVariable = "SCALEBENCH_PYTHON";

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

}  // namespace

std::string python_interpreter() {
  const char* from_environment = std::getenv(kPythonEnvironmentVariable);
  if (from_environment != nullptr && *from_environment != '\0') return from_environment;
  if (*build_info::kPython != '\0') return build_info::kPython;
  throw InputError(
      "scalebench was built without a Python interpreter for the analysis commands: set "
      "SCALEBENCH_PYTHON=/path/to/.venv/bin/python, or reconfigure with "
      "-DSCALEBENCH_PYTHON=... (setup.sh does this)");
}

AdaptiveLook look_at_results(const std::filesystem::path& results, int64_t round) {
  SubprocessOptions options;
  options.argv = {python_interpreter(),
                  "-m",
                  "scalebench_analysis",
                  "decide",
                  results.string(),
                  "--look",
                  std::to_string(round),
                  "--format",
                  "json"};
  options.timeout_s = 120;
  options.separate_stderr = true;
  const SubprocessResult result = run_subprocess(options);
  const auto tail = [](const std::string& text) {
    return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
  };
  if (result.exit_code != 0) {
    throw Error("scalebench_analysis decide exited with " + std::to_string(result.exit_code) +
                (result.timed_out ? " (timed out after 120 s)" : "") + ": " +
                tail(result.error_output));
  }
  try {
    const auto json = nlohmann::json::parse(result.output);
    AdaptiveLook look;
    for (const auto& id : json.at("undecided")) look.undecided.insert(id.get<std::string>());
    look.summary = json.value("summary", std::string());
    return look;
  } catch (const nlohmann::json::exception& error) {
    throw Error(std::string("scalebench_analysis decide printed no JSON look (") + error.what() +
                "): " + tail(result.output));
  }
}

int run_analysis(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {python_interpreter(), "-m", "scalebench_analysis"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_and_wait(argv);
}

}  // namespace scalebench
