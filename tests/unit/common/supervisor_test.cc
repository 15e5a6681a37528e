// The program supervisor (Note [Program supervisor]): its pure parts, and Subprocess with a
// supervisor, with a cgroup where this machine allows one and with the subreaper only.
#include "common/base/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "common/base/subprocess.h"
#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

using testing::process_gone;
using testing::read_file;
using testing::TempDir;

/// The pid a script wrote to `file` (`echo $$ > file`), once it is there.
pid_t pid_in(const std::filesystem::path& file) {
  while (true) {
    const std::string text = std::filesystem::exists(file) ? read_file(file) : std::string();
    if (!text.empty() && text.back() == '\n') return std::stoi(text);
    ::usleep(10000);
  }
}

TEST(SupervisorArguments, ParsesTheCommandLine) {
  const auto parsed = supervisor::parse_arguments({"sv", "--parent", "42", "--status-fd", "4",
                                                   "--grace", "1.5", "--cleanup", "/tmp/x",
                                                   "--cgroup", "off", "--", "prog", "--", "a"});
  EXPECT_EQ(parsed.parent, 42);
  EXPECT_EQ(parsed.status_fd, 4);
  EXPECT_DOUBLE_EQ(parsed.grace_s, 1.5);
  EXPECT_EQ(parsed.cleanup_dir, "/tmp/x");
  EXPECT_FALSE(parsed.use_cgroup);
  EXPECT_EQ(parsed.argv, (std::vector<std::string>{"prog", "--", "a"}));
}

TEST(SupervisorArguments, RefusesWhatItCannotUse) {
  using supervisor::parse_arguments;
  EXPECT_THROW(parse_arguments({"sv", "--parent", "42", "--status-fd", "4"}),
               std::invalid_argument);  // no program
  EXPECT_THROW(parse_arguments({"sv", "--status-fd", "4", "--", "p"}), std::invalid_argument);
  EXPECT_THROW(parse_arguments({"sv", "--parent", "42", "--grace", "-1", "--", "p"}),
               std::invalid_argument);
  EXPECT_THROW(parse_arguments({"sv", "--parent", "42", "--grace", "1s", "--", "p"}),
               std::invalid_argument);
  EXPECT_THROW(parse_arguments({"sv", "--parent", "42", "--bogus", "1", "--", "p"}),
               std::invalid_argument);
  EXPECT_THROW(parse_arguments({"sv", "--parent", "42", "--cgroup", "on", "--", "p"}),
               std::invalid_argument);
  EXPECT_THROW(parse_arguments({"sv", "--parent", "--", "p"}), std::invalid_argument);
}

TEST(SupervisorCgroup, FindsTheFolderOfThisProcesssCgroup2) {
  const std::string hybrid =
      "30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
      "31 30 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "39 30 0:35 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(supervisor::cgroup2_folder(hybrid, "4:memory:/x\n0::/\n"), "/sys/fs/cgroup/unified");
  const std::string pure = "29 23 0:26 / /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(supervisor::cgroup2_folder(pure, "0::/user.slice/session-3.scope\n"),
            "/sys/fs/cgroup/user.slice/session-3.scope");
  // A container's namespace root: the mount's root is a sub-tree.
  const std::string container = "29 23 0:26 /job_7 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(supervisor::cgroup2_folder(container, "0::/job_7/step_0\n"), "/sys/fs/cgroup/step_0");
  EXPECT_EQ(supervisor::cgroup2_folder(hybrid, "4:memory:/x\n"), std::nullopt);  // v1 only
  EXPECT_EQ(supervisor::cgroup2_folder("31 30 0:27 / /c rw - cgroup cgroup rw\n", "0::/\n"),
            std::nullopt);
  EXPECT_EQ(supervisor::cgroup2_folder(pure, "0::/gone (deleted)\n"), std::nullopt);
}

TEST(SupervisorStatus, ParsesTheFourKindsOfLine) {
  const auto started = supervisor::parse_status_line("started 123 cgroup");
  ASSERT_TRUE(started);
  EXPECT_EQ(started->kind, "started");
  EXPECT_EQ(started->first, 123);
  EXPECT_EQ(started->rest, "cgroup");
  const auto left = supervisor::parse_status_line("left 9 (sleep) sleep 300");
  ASSERT_TRUE(left);
  EXPECT_EQ(left->rest, "(sleep) sleep 300");
  const auto exit = supervisor::parse_status_line("exit -1 9 0.250000");
  ASSERT_TRUE(exit);
  EXPECT_EQ(exit->first, -1);
  EXPECT_EQ(exit->rest, "9 0.250000");
  EXPECT_FALSE(supervisor::parse_status_line("other 1 x"));
  EXPECT_FALSE(supervisor::parse_status_line("started x"));
  EXPECT_FALSE(supervisor::parse_status_line(""));
}

/// Subprocess with the supervisor, for each mechanism (the parameter: may it make a cgroup).
class Supervised : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    const auto found = find_supervisor();
    ASSERT_TRUE(found) << "scalebench-supervisor not built (target scalebench-supervisor)";
    supervisor_ = *found;
  }
  [[nodiscard]] SubprocessOptions sh(const std::string& script) const {
    SubprocessOptions options;
    options.argv = {"sh", "-c", script};
    options.supervisor = supervisor_;
    options.supervisor_cgroup = GetParam();
    options.kill_grace_s = 0.3;
    return options;
  }
  std::filesystem::path supervisor_;
};

INSTANTIATE_TEST_SUITE_P(Mechanisms, Supervised, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "cgroup" : "subreaper"; });

TEST_P(Supervised, ReportsTheProgramsOwnExitAndOutput) {
  const SubprocessResult result = run_subprocess(sh("echo out; echo err >&2; exit 3"));
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.term_signal, 0);
  EXPECT_EQ(result.output, "out\nerr\n");
  EXPECT_TRUE(result.leftovers.empty());
  EXPECT_TRUE(result.containment == "cgroup" || result.containment == "subreaper")
      << result.containment;
  if (!GetParam()) {
    EXPECT_EQ(result.containment, "subreaper");
  }
  const SubprocessResult killed = run_subprocess(sh("kill -USR1 $$"));
  EXPECT_EQ(killed.term_signal, SIGUSR1);
  EXPECT_EQ(killed.exit_code, -1);
}

TEST_P(Supervised, PidIsTheProgramsAndTheProgramGetsTheReportDescriptor) {
  TempDir dir;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  SubprocessOptions options = sh("echo $$ > pid; echo record >&3");
  options.working_dir = dir.path();
  options.pass_fd = fds[1];
  Subprocess child(options);
  ::close(fds[1]);
  const pid_t pid = child.pid();
  const SubprocessResult result = child.wait();
  EXPECT_TRUE(result.ok()) << result.describe() << result.output;
  EXPECT_EQ(std::stoi(read_file(dir.path() / "pid")), pid);
  char buffer[16] = {};
  EXPECT_EQ(::read(fds[0], buffer, sizeof(buffer)), 7);
  EXPECT_EQ(std::string(buffer), "record\n");
  ::close(fds[0]);
}

TEST_P(Supervised, ADaemonThatLeftTheGroupIsEndedAndNamed) {
  TempDir dir;
  // Double fork + setsid: the daemon leaves the program's group and session; it ignores
  // SIGTERM and keeps the output pipe, so it is ended by SIGKILL after the grace.
  SubprocessOptions options =
      sh("(setsid sh -c 'trap \"\" TERM; echo $$ > daemon.pid; exec sleep 300' &); "
         "while [ ! -s daemon.pid ]; do sleep 0.01; done; echo started");
  options.working_dir = dir.path();
  const auto before = std::chrono::steady_clock::now();
  const SubprocessResult result = run_subprocess(options);
  const std::chrono::duration<double> call = std::chrono::steady_clock::now() - before;
  EXPECT_TRUE(result.ok()) << result.describe();
  EXPECT_EQ(result.output, "started\n");
  // The run time is the program's: the daemon's end, SIGKILL after the grace (it ignores
  // SIGTERM), is not in it but is in the call.
  EXPECT_LE(result.wall_s + options.kill_grace_s, call.count());
  const pid_t daemon = pid_in(dir.path() / "daemon.pid");
  EXPECT_TRUE(process_gone(daemon, 2.0));
  ASSERT_EQ(result.leftovers.size(), 1u);
  EXPECT_EQ(result.leftovers[0], "pid " + std::to_string(daemon) + " (sleep) sleep 300");
}

TEST_P(Supervised, TimeoutEndsTheProgramAndItsDaemon) {
  TempDir dir;
  SubprocessOptions options =
      sh("(setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' &); sleep 300");
  options.working_dir = dir.path();
  options.timeout_s = 0.5;
  const SubprocessResult result = run_subprocess(options);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.term_signal, SIGTERM);
  EXPECT_TRUE(process_gone(pid_in(dir.path() / "daemon.pid"), 2.0));
}

TEST_P(Supervised, ProgramNotFoundIsASubprocessErrorWithEnoent) {
  SubprocessOptions options = sh("");
  options.argv = {"scalebench-no-such-program"};
  try {
    Subprocess child(options);
    FAIL() << "started";
  } catch (const SubprocessError& e) {
    EXPECT_EQ(e.error_number(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("scalebench-no-such-program"), std::string::npos);
  }
}

TEST_P(Supervised, EverythingEndsAndTheFolderGoesWhenTheParentIsKilled) {
  TempDir dir;
  const auto cell = dir.path() / "cell";
  std::filesystem::create_directories(cell / "rank0");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  SubprocessOptions options =
      sh("trap '' TERM; (setsid sh -c 'trap \"\" TERM; echo $$ > daemon.pid; exec sleep 300' &); "
         "while [ ! -s daemon.pid ]; do sleep 0.01; done; echo $$ > program.pid; sleep 300");
  options.working_dir = dir.path();
  options.cleanup_dir = cell;
  const pid_t parent = ::fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {  // the "worker": starts the program, says so, and waits to be killed
    ::close(ready[0]);
    Subprocess child(options);
    pid_in(dir.path() / "program.pid");
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  const pid_t program = pid_in(dir.path() / "program.pid");
  const pid_t daemon = pid_in(dir.path() / "daemon.pid");
  ::kill(parent, SIGKILL);
  int status = 0;
  ::waitpid(parent, &status, 0);
  // Both ignore SIGTERM: SIGKILL after the grace.
  EXPECT_TRUE(process_gone(program, 10.0));
  EXPECT_TRUE(process_gone(daemon, 10.0));
  for (int i = 0; i < 100 && std::filesystem::exists(cell); ++i) ::usleep(20000);
  EXPECT_FALSE(std::filesystem::exists(cell));
}

TEST_P(Supervised, DestructorEndsTheProgramAndItsDaemonAtOnce) {
  TempDir dir;
  SubprocessOptions options =
      sh("(setsid sh -c 'trap \"\" TERM; echo $$ > daemon.pid; exec sleep 300' &); sleep 300");
  options.working_dir = dir.path();
  pid_t program = -1;
  {
    Subprocess child(options);
    program = child.pid();
    pid_in(dir.path() / "daemon.pid");
  }
  EXPECT_TRUE(process_gone(program, 2.0));
  EXPECT_TRUE(process_gone(pid_in(dir.path() / "daemon.pid"), 2.0));
}

}  // namespace
}  // namespace scalebench
