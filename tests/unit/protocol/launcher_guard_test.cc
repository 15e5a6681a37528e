// Note [Launcher guard]: a rank whose parent is Open MPI's launcher leaves a guard that ends
// the launcher if it outlives the grace, with one line on the launcher's stderr; a launcher
// that ends in time, or a parent that is no launcher, is left alone.
//
// The "launcher" is a shell script named mpirun (a script's comm is its file name) that runs
// this test binary as its child; the child calls guard_launcher_end at static
// initialisation (SB_LAUNCHER_GUARD_HELPER = the grace) and exits, as a rank would.
#include "protocol/launcher_guard.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace scalebench {
namespace {

[[maybe_unused]] const bool kHelper = [] {
  if (const char* grace = std::getenv("SB_LAUNCHER_GUARD_HELPER")) {
    guard_launcher_end("a test", std::atof(grace));
    ::_exit(0);
  }
  return false;
}();

struct Ended {
  bool killed = false;  ///< by SIGKILL
  int status = -1;      ///< exit status when not killed
  double seconds = 0;
  std::string stderr_text;
};

/// Runs `name` (a script: runs this binary as its helper, then `after`) and waits for it.
Ended run_launcher(const std::string& name, const std::string& after, double grace_s) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("sb-launcher-guard-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto script = dir / name;
  std::ofstream(script) << "#!/bin/sh\n\"$@\"\n" << after << "\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  const auto err = dir / "stderr";
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  const std::string grace = std::to_string(grace_s);
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = ::fork();
  if (child == 0) {
    ::setenv("SB_LAUNCHER_GUARD_HELPER", grace.c_str(), 1);
    if (std::freopen(err.c_str(), "w", stderr) == nullptr) ::_exit(126);
    ::execl(script.c_str(), name.c_str(), self.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  Ended ended;
  ended.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ended.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  ended.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ostringstream text;
  text << std::ifstream(err).rdbuf();
  ended.stderr_text = text.str();
  std::filesystem::remove_all(dir);
  return ended;
}

TEST(LauncherGuard, KnowsOpenMpisLaunchersByName) {
  for (const char* name : {"mpirun", "mpiexec", "orterun", "prterun"}) {
    EXPECT_TRUE(is_open_mpi_launcher(name)) << name;
  }
  for (const char* name :
       {"orted", "slurmstepd", "srun", "bash", "mpirun2", "hydra_pmi_proxy", ""}) {
    EXPECT_FALSE(is_open_mpi_launcher(name)) << name;
  }
}

TEST(LauncherGuard, EndsALauncherThatOutlivesTheGrace) {
  const Ended ended = run_launcher("mpirun", "exec sleep 30", 0.3);
  EXPECT_TRUE(ended.killed) << "status " << ended.status;
  EXPECT_LT(ended.seconds, 20) << "the guard did not act; sleep 30 ended it";
  EXPECT_NE(ended.stderr_text.find("mpirun (pid "), std::string::npos) << ended.stderr_text;
  EXPECT_NE(ended.stderr_text.find("did not end within 0.3 s of the job's end (a test)"),
            std::string::npos)
      << ended.stderr_text;
}

TEST(LauncherGuard, LeavesALauncherThatEndsInTime) {
  const Ended ended = run_launcher("mpirun", "exit 5", 2);
  EXPECT_FALSE(ended.killed);
  EXPECT_EQ(ended.status, 5);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ended.stderr_text.find("did not end"), std::string::npos) << ended.stderr_text;
}

TEST(LauncherGuard, LeavesAParentThatIsNoLauncher) {
  const Ended ended = run_launcher("orted", "sleep 1; exit 6", 0.1);
  EXPECT_FALSE(ended.killed);
  EXPECT_EQ(ended.status, 6);
  EXPECT_EQ(ended.stderr_text, "");
}

}  // namespace
}  // namespace scalebench
