#include "matrix/branch_prepare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "matrix/git_repo.h"
#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

using testing::FixtureRepo;
using testing::process_gone;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

TEST(BranchPrepare, SucceedsInsideTheWorktreeAndLogsFramedOutput) {
  TempDir dir;
  const auto log = dir.path() / "logs" / "prepare-main.log";
  const PrepareOutcome outcome = run_prepare(
      {"sh", "-c", "echo exported > model.pt; echo done; echo note >&2"}, dir.path(), 10.0, log);
  EXPECT_TRUE(outcome.ok());
  EXPECT_EQ(outcome.exit_status, 0);
  EXPECT_FALSE(outcome.timed_out);
  EXPECT_EQ(outcome.reason, "");
  EXPECT_EQ(outcome.log_path, log);
  EXPECT_EQ(outcome.output_tail, "done\nnote\n");
  EXPECT_EQ(read_file(dir.path() / "model.pt"), "exported\n");
  const std::string text = read_file(log);
  EXPECT_NE(text.find("==== prepare "), std::string::npos) << text;
  EXPECT_NE(text.find(" in " + dir.path().string() + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("$ sh -c 'echo exported > model.pt; echo done; echo note >&2'\ndone\nnote\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("==== exit status 0 after "), std::string::npos) << text;
  EXPECT_NO_THROW(throw_if_failed(outcome));
}

TEST(BranchPrepare, RelativeProgramIsFoundInTheWorktreeAndArgumentsAreVerbatim) {
  TempDir dir;
  write_file(dir.path() / "scripts" / "export.sh", "#!/bin/sh\nprintf '[%s]' \"$@\"\n");
  std::filesystem::permissions(dir.path() / "scripts" / "export.sh",
                               std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add);
  const PrepareOutcome outcome =
      run_prepare({"./scripts/export.sh", "a b", "$(touch canary)"}, dir.path(), 10.0,
                  dir.path() / "prepare.log", {{"SB_BRANCH", "main"}});
  EXPECT_TRUE(outcome.ok()) << outcome.reason;
  EXPECT_EQ(outcome.output_tail, "[a b][$(touch canary)]");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "canary"));
}

TEST(BranchPrepare, PassesExtraEnvironment) {
  TempDir dir;
  const PrepareOutcome outcome = run_prepare({"sh", "-c", "echo \"$SB_BRANCH\""}, dir.path(), 10.0,
                                             dir.path() / "p.log", {{"SB_BRANCH", "feature/x"}});
  EXPECT_EQ(outcome.output_tail, "feature/x\n");
}

TEST(BranchPrepare, FailureGivesTheExitStatusAndTheOutputTail) {
  TempDir dir;
  const auto log = dir.path() / "p.log";
  const PrepareOutcome outcome = run_prepare(
      {"sh", "-c", "echo loading; echo 'Traceback: boom' >&2; exit 3"}, dir.path(), 10.0, log);
  EXPECT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.exit_status, 3);
  EXPECT_FALSE(outcome.timed_out);
  EXPECT_EQ(outcome.output_tail, "loading\nTraceback: boom\n");
  EXPECT_NE(outcome.reason.find("prepare step `sh -c"), std::string::npos) << outcome.reason;
  EXPECT_NE(outcome.reason.find("failed: exit status 3 after "), std::string::npos)
      << outcome.reason;
  EXPECT_NE(outcome.reason.find("(log: " + log.string() + ")"), std::string::npos)
      << outcome.reason;
  EXPECT_TRUE(outcome.reason.ends_with("last output:\nloading\nTraceback: boom\n"))
      << outcome.reason;
  EXPECT_NE(read_file(log).find("==== exit status 3 after "), std::string::npos);
  try {
    throw_if_failed(outcome);
    FAIL() << "expected PrepareError";
  } catch (const PrepareError& e) {
    EXPECT_EQ(e.phase(), FailurePhase::kPrepare);
    EXPECT_EQ(std::string(e.what()), outcome.reason);
    EXPECT_EQ(e.outcome().exit_status, 3);
  }
}

TEST(BranchPrepare, TimeoutKillsTheStepAndItsChildren) {
  TempDir dir;
  const PrepareOutcome outcome =
      run_prepare({"sh", "-c", "echo started; sleep 30 & echo $! > child.pid; sleep 30"},
                  dir.path(), 1.0, dir.path() / "p.log");
  EXPECT_FALSE(outcome.ok());
  EXPECT_TRUE(outcome.timed_out);
  EXPECT_EQ(outcome.exit_status, 128 + 15);
  EXPECT_LT(outcome.wall_s, 6.0);
  EXPECT_NE(outcome.reason.find("timed out after 1 s"), std::string::npos) << outcome.reason;
  EXPECT_NE(outcome.reason.find("last output:\nstarted\n"), std::string::npos) << outcome.reason;
  EXPECT_TRUE(process_gone(std::stoi(read_file(dir.path() / "child.pid"))));
}

TEST(BranchPrepare, ProgramNotFoundIsAFailedOutcomeNotAnException) {
  TempDir dir;
  PrepareOutcome outcome;
  EXPECT_NO_THROW(outcome = run_prepare({"scalebench-no-such-exporter"}, dir.path(), 10.0,
                                        dir.path() / "p.log"));
  EXPECT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.exit_status, 127);
  EXPECT_NE(outcome.reason.find("scalebench-no-such-exporter"), std::string::npos);
  EXPECT_NE(outcome.reason.find("could not start"), std::string::npos) << outcome.reason;
  EXPECT_NE(read_file(dir.path() / "p.log").find("No such file or directory"), std::string::npos);
}

TEST(BranchPrepare, InvalidArgumentsAreInputErrors) {
  TempDir dir;
  EXPECT_THROW(run_prepare({}, dir.path(), 10.0, dir.path() / "p.log"), InputError);
  EXPECT_THROW(run_prepare({"true"}, dir.path(), 0.0, dir.path() / "p.log"), InputError);
}

TEST(BranchPrepare, OutputTailIsBounded) {
  TempDir dir;
  const PrepareOutcome outcome = run_prepare(
      {"sh", "-c", "i=0; while [ $i -lt 1000 ]; do echo line$i; i=$((i+1)); done; exit 1"},
      dir.path(), 10.0, dir.path() / "p.log");
  EXPECT_EQ(outcome.exit_status, 1);
  EXPECT_TRUE(outcome.output_tail.starts_with("...\nline960\n")) << outcome.output_tail;
  EXPECT_TRUE(outcome.output_tail.ends_with("line999\n"));
  EXPECT_EQ(std::count(outcome.output_tail.begin(), outcome.output_tail.end(), '\n'), 41);
  EXPECT_NE(read_file(dir.path() / "p.log").find("line0\n"), std::string::npos);
}

TEST(BranchPrepare, RunsEachBranchsOwnScriptInItsWorktree) {
  FixtureRepo fixture;
  for (const std::string ref : {"main", "feature"}) {
    const ResolvedBranch branch = checkout_branch(fixture.repo, ref, fixture.work);
    const PrepareOutcome outcome =
        run_prepare({"./prepare.sh", "--out", "model.pt"}, branch.worktree, 10.0,
                    fixture.work / "logs" / ("prepare-" + ref + ".log"));
    EXPECT_TRUE(outcome.ok()) << outcome.reason;
    EXPECT_EQ(outcome.output_tail, "prepare on " + ref + ": --out model.pt\n");
  }
}

}  // namespace
}  // namespace scalebench
