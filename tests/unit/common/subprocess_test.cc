#include "common/base/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

using testing::process_gone;
using testing::read_file;
using testing::TempDir;

SubprocessOptions sh(const std::string& script) {
  SubprocessOptions options;
  options.argv = {"sh", "-c", script};
  return options;
}

TEST(Subprocess, MergesStdoutAndStderrAndReportsExitCode) {
  const SubprocessResult result = run_subprocess(sh("echo out; echo err >&2; exit 3"));
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.term_signal, 0);
  EXPECT_FALSE(result.timed_out);
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.output, "out\nerr\n");
  EXPECT_EQ(result.describe(), "exit status 3");
}

TEST(Subprocess, SeparatesStderrWhenAsked) {
  SubprocessOptions options = sh("echo out; echo err >&2");
  options.separate_stderr = true;
  const SubprocessResult result = run_subprocess(options);
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.output, "out\n");
  EXPECT_EQ(result.error_output, "err\n");
}

TEST(Subprocess, ArgumentsReachTheProgramVerbatimWithoutAShell) {
  TempDir dir;
  const std::string canary = (dir.path() / "canary").string();
  SubprocessOptions options;
  options.argv = {"printf",
                  "[%s]",
                  "$(touch " + canary + ")",
                  "`touch " + canary + "`",
                  "a b;touch " + canary,
                  "*",
                  "'\"",
                  "x\ny"};
  options.working_dir = dir.path();
  const SubprocessResult result = run_subprocess(options);
  ASSERT_TRUE(result.ok()) << result.output;
  EXPECT_EQ(result.output, "[$(touch " + canary + ")][`touch " + canary + "`][a b;touch " + canary +
                               "][*]['\"][x\ny]");
  EXPECT_FALSE(std::filesystem::exists(canary));
}

TEST(Subprocess, RunsInTheWorkingDirectory) {
  TempDir dir;
  SubprocessOptions options;
  options.argv = {"pwd", "-P"};
  options.working_dir = dir.path();
  const SubprocessResult result = run_subprocess(options);
  EXPECT_EQ(result.output, std::filesystem::canonical(dir.path()).string() + "\n");
}

TEST(Subprocess, PassesTheEnvironmentWithOverridesAndRemovals) {
  ::setenv("SB_SUBPROCESS_PASS", "passed", 1);
  ::setenv("SB_SUBPROCESS_UNSET", "present", 1);
  ::setenv("SB_SUBPROCESS_SET", "old", 1);
  SubprocessOptions options =
      sh("echo \"$SB_SUBPROCESS_PASS|${SB_SUBPROCESS_UNSET-gone}|$SB_SUBPROCESS_SET\"");
  options.unset_environment = {"SB_SUBPROCESS_UNSET"};
  options.set_environment = {{"SB_SUBPROCESS_SET", "new value"}};
  const SubprocessResult result = run_subprocess(options);
  EXPECT_EQ(result.output, "passed|gone|new value\n");
  ::unsetenv("SB_SUBPROCESS_PASS");
  ::unsetenv("SB_SUBPROCESS_UNSET");
  ::unsetenv("SB_SUBPROCESS_SET");
}

TEST(Subprocess, RemovesPrefixesAndKeepsTheLastOfTwoSettingsOfOneName) {
  ::setenv("SB_PREFIXED_ONE", "one", 1);
  ::setenv("SB_PREFIXED_TWO", "two", 1);
  ::setenv("SB_KEPT", "kept", 1);
  SubprocessOptions options =
      sh("echo \"${SB_PREFIXED_ONE-gone}|${SB_PREFIXED_TWO-gone}|$SB_KEPT|$SB_TWICE\"; "
         "env | grep -c '^SB_TWICE='");
  options.unset_environment_prefixes = {"SB_PREFIXED_"};
  options.set_environment = {{"SB_TWICE", "first"}, {"SB_TWICE", "second"}};
  const SubprocessResult result = run_subprocess(options);
  EXPECT_EQ(result.output, "gone|gone|kept|second\n1\n");
  ::unsetenv("SB_PREFIXED_ONE");
  ::unsetenv("SB_PREFIXED_TWO");
  ::unsetenv("SB_KEPT");
}

TEST(Subprocess, StdinIsDevNull) {
  const SubprocessResult result = run_subprocess(sh("cat; echo end"));
  EXPECT_EQ(result.output, "end\n");
}

TEST(Subprocess, ProgramNotFoundIsASubprocessErrorWithEnoent) {
  SubprocessOptions options;
  options.argv = {"scalebench-no-such-program-xyz", "--version"};
  try {
    run_subprocess(options);
    FAIL() << "expected SubprocessError";
  } catch (const SubprocessError& e) {
    EXPECT_EQ(e.error_number(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("scalebench-no-such-program-xyz"), std::string::npos);
  }
}

TEST(Subprocess, MissingWorkingDirectoryIsASubprocessError) {
  SubprocessOptions options;
  options.argv = {"true"};
  options.working_dir = "/nonexistent/scalebench/dir";
  EXPECT_THROW(run_subprocess(options), SubprocessError);
}

TEST(Subprocess, EmptyArgvIsAnInputError) {
  EXPECT_THROW(run_subprocess(SubprocessOptions{}), InputError);
  SubprocessOptions options;
  options.argv = {""};
  EXPECT_THROW(run_subprocess(options), InputError);
}

TEST(Subprocess, TimeoutKillsTheWholeProcessGroup) {
  TempDir dir;
  SubprocessOptions options = sh("sleep 30 & echo $! > child.pid; wait");
  options.working_dir = dir.path();
  options.timeout_s = 1.0;
  options.kill_grace_s = 1.0;
  const SubprocessResult result = run_subprocess(options);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.term_signal, SIGTERM);
  EXPECT_EQ(result.shell_status(), 128 + SIGTERM);
  EXPECT_LT(result.wall_s, 6.0);
  EXPECT_GE(result.wall_s, 0.9);
  EXPECT_NE(result.describe(1.0).find("timed out after 1 s"), std::string::npos);
  const pid_t child = std::stoi(read_file(dir.path() / "child.pid"));
  EXPECT_TRUE(process_gone(child)) << "the grandchild sleep survived the timeout";
}

TEST(Subprocess, SigkillFollowsWhenSigtermIsIgnored) {
  SubprocessOptions options = sh("trap '' TERM; sleep 30");
  options.timeout_s = 0.5;
  options.kill_grace_s = 0.5;
  const SubprocessResult result = run_subprocess(options);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.term_signal, SIGKILL);
  EXPECT_LT(result.wall_s, 6.0);
  EXPECT_NE(result.describe().find("SIGKILL"), std::string::npos);
}

TEST(Subprocess, LeftoverChildrenAreKilledWhenTheChildExits) {
  TempDir dir;
  // One leftover holds the output pipe, one does not; neither may outlive the call.
  SubprocessOptions options = sh(
      "sleep 30 & echo $! > holder.pid; sleep 30 >/dev/null 2>&1 & echo $! > quiet.pid; echo done");
  options.working_dir = dir.path();
  options.kill_grace_s = 1.0;
  const SubprocessResult result = run_subprocess(options);
  EXPECT_TRUE(result.ok()) << result.describe();
  EXPECT_EQ(result.output, "done\n");
  EXPECT_LT(result.wall_s, 6.0);
  EXPECT_TRUE(process_gone(std::stoi(read_file(dir.path() / "holder.pid"))));
  EXPECT_TRUE(process_gone(std::stoi(read_file(dir.path() / "quiet.pid"))));
}

TEST(Subprocess, DestructorKillsAndReapsARunningChild) {
  pid_t pid = -1;
  {
    SubprocessOptions options;
    options.argv = {"sleep", "30"};
    Subprocess child(options);
    pid = child.pid();
    ASSERT_GT(pid, 0);
  }
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(Subprocess, ReportsTheSignalThatEndedTheChild) {
  const SubprocessResult result = run_subprocess(sh("kill -USR1 $$"));
  EXPECT_EQ(result.term_signal, SIGUSR1);
  EXPECT_EQ(result.exit_code, -1);
  EXPECT_EQ(result.shell_status(), 128 + SIGUSR1);
  EXPECT_NE(result.describe().find("SIGUSR1"), std::string::npos);
}

TEST(Subprocess, ChildGetsDefaultSignalDispositions) {
  // With SIGPIPE ignored here, an inherited disposition would make `yes` fail with EPIPE.
  struct sigaction ignore {};
  struct sigaction previous {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);
  const SubprocessResult result = run_subprocess(sh("yes | head -n 1"));
  sigaction(SIGPIPE, &previous, nullptr);
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.output, "y\n");
}

TEST(Subprocess, KeepsTheTailAndLogsEverything) {
  TempDir dir;
  SubprocessOptions options = sh("i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done");
  options.max_captured_bytes = 100;
  options.log_path = dir.path() / "logs" / "out.log";
  const SubprocessResult result = run_subprocess(options);
  EXPECT_TRUE(result.ok());
  EXPECT_TRUE(result.output_truncated);
  EXPECT_EQ(result.output.size(), 100U);
  EXPECT_TRUE(result.output.ends_with("line1999\n"));
  const std::string log = read_file(options.log_path);
  EXPECT_TRUE(log.starts_with("line0\nline1\n"));
  EXPECT_TRUE(log.ends_with("line1999\n"));
}

TEST(Subprocess, UnwritableLogIsASubprocessError) {
  SubprocessOptions options;
  options.argv = {"true"};
  options.log_path = "/proc/scalebench-not-writable/log.txt";
  EXPECT_THROW(run_subprocess(options), SubprocessError);
}

TEST(SubprocessQuoteArgv, QuotesForAPosixShell) {
  EXPECT_EQ(quote_argv({"git", "-C", "/a/b", "rev-parse"}), "git -C /a/b rev-parse");
  EXPECT_EQ(quote_argv({"echo", "a b", "it's", ""}), "echo 'a b' 'it'\\''s' ''");
  EXPECT_EQ(quote_argv({"$(touch x)", "`x`", ";"}), "'$(touch x)' '`x`' ';'");
  EXPECT_EQ(quote_argv({"a\nb", std::string("c\x01")}), "$'a\\nb' $'c\\x01'");
}

TEST(SubprocessTailLines, KeepsTheLastLinesWithinTheByteLimit) {
  struct Case {
    std::string text;
    std::size_t lines;
    std::size_t bytes;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"", 3, 100, ""},
      {"a\nb\nc\n", 5, 100, "a\nb\nc\n"},
      {"a\nb\nc\n", 2, 100, "...\nb\nc\n"},
      {"a\nb\nc", 1, 100, "...\nc"},
      {"\nb", 1, 100, "...\nb"},
      {"\nb", 2, 100, "\nb"},
      {"a\n\nb\n", 2, 100, "...\n\nb\n"},
      {"aaaa\nbbbb\ncccc\n", 10, 7, "...\ncccc\n"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(tail_lines(c.text, c.lines, c.bytes), c.expected)
        << "text=" << quote_argv({c.text}) << " lines=" << c.lines << " bytes=" << c.bytes;
  }
}

}  // namespace
}  // namespace scalebench
