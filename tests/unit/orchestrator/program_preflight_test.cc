// Note [Program preflight]: one check per distinct configuration (tree, argv, environment),
// the cells that share it, the check as run, and the error text of a failed one.
#include "program/preflight/program_preflight.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "common/cell/program.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;

CellSpec program_cell(const std::string& source, const std::string& branch, int64_t batch) {
  CellSpec cell;
  cell.source = source;
  cell.branch = branch;
  cell.experiment = "cnn";
  cell.batch_size = batch;
  cell.cell_id = source + "/" + branch + "/" + std::to_string(batch);
  cell.program.python = "/envs/user/bin/python";
  cell.program.command = {"python", "train.py", "experiment=cnn", "data.batch_size={batch_size}",
                          "hydra.run.dir={output_dir}/hydra"};
  cell.program.env = {{"PYTHONPATH", "."}, {"RUN", "{experiment}-{branch}"}};
  cell.program.preflight.kind = PreflightKind::kHydra;
  return cell;
}

PreflightContext context() {
  return {.tree_of = [](const CellSpec& cell) { return fs::path("/wt") / cell.branch; },
          .scratch_dir = "/scratch/preflight",
          .caller_path = "/usr/bin"};
}

TEST(PlanPreflight, OneCheckPerDistinctTreeArgvAndEnvironment) {
  std::vector<CellSpec> cells{
      program_cell("tasks.csv:2", "main", 8),
      program_cell("tasks.csv:2", "main", 8),   // a repetition, another world size: same check
      program_cell("tasks.csv:4", "main", 8),   // another row, the same configuration
      program_cell("tasks.csv:3", "main", 16),  // another batch: another command line
      program_cell("tasks.csv:5", "exp", 8),    // another branch: another tree
  };
  cells[1].repetition = 1;
  cells[1].world_size = 2;
  CellSpec other_env = program_cell("tasks.csv:6", "main", 8);
  other_env.program.env["EXTRA"] = "1";
  cells.push_back(other_env);
  CellSpec unchecked = program_cell("tasks.csv:7", "main", 8);
  unchecked.program.preflight.kind = PreflightKind::kNone;
  cells.push_back(unchecked);
  CellSpec builtin;
  builtin.model.zoo = "mlp";
  cells.push_back(builtin);

  const auto checks = plan_preflight(cells, context());
  ASSERT_EQ(checks.size(), 4U);
  EXPECT_EQ(checks[0].sources, (std::vector<std::string>{"tasks.csv:2", "tasks.csv:4"}));
  EXPECT_EQ(checks[0].cells, 3U);
  EXPECT_EQ(checks[0].tree, fs::path("/wt/main"));
  EXPECT_EQ(checks[1].sources, std::vector<std::string>{"tasks.csv:3"});
  EXPECT_EQ(checks[2].sources, std::vector<std::string>{"tasks.csv:5"});
  EXPECT_EQ(checks[2].branch, "exp");
  EXPECT_EQ(checks[2].tree, fs::path("/wt/exp"));
  EXPECT_EQ(checks[3].sources, std::vector<std::string>{"tasks.csv:6"});
}

TEST(PlanPreflight, HydraIsTheCommandWithCfgJobInTheCellsEnvironment) {
  const auto checks = plan_preflight({program_cell("m.yaml:9", "main", 8)}, context());
  ASSERT_EQ(checks.size(), 1U);
  EXPECT_EQ(checks[0].argv,
            (std::vector<std::string>{"/envs/user/bin/python", "train.py", "experiment=cnn",
                                      "data.batch_size=8", "hydra.run.dir=/scratch/preflight/hydra",
                                      "--cfg", "job"}));
  const std::vector<std::pair<std::string, std::string>> environment{
      {"SCALEBENCH_PREFLIGHT", "1"},
      {"CUDA_VISIBLE_DEVICES", ""},
      {"PATH", "/envs/user/bin:/usr/bin"},
      {"PYTHONPATH", "."},
      {"RUN", "cnn-main"}};
  EXPECT_EQ(checks[0].environment, environment);
  EXPECT_EQ(checks[0].timeout_s, 60.0);
}

TEST(PlanPreflight, ACommandOfTheUsersOwnIsItsTemplateSubstituted) {
  CellSpec cell = program_cell("m.yaml:9", "main", 8);
  cell.program.preflight = {.kind = PreflightKind::kCommand,
                            .command = {"python", "check.py", "--batch", "{batch_size}"},
                            .timeout_s = 5.0};
  const auto checks = plan_preflight({cell}, context());
  ASSERT_EQ(checks.size(), 1U);
  EXPECT_EQ(checks[0].argv,
            (std::vector<std::string>{"/envs/user/bin/python", "check.py", "--batch", "8"}));
  EXPECT_EQ(checks[0].timeout_s, 5.0);
}

TEST(PlanPreflight, APlaceholderThatCannotBeFilledNamesTheCellsLine) {
  CellSpec cell = program_cell("m.yaml:9", "main", 8);
  cell.program.command.push_back("{nonsense}");
  try {
    (void)plan_preflight({cell}, context());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("m.yaml:9: the preflight check of experiment cnn"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("{nonsense}"), std::string::npos) << e.what();
  }
}

PreflightCheck check_of(std::vector<std::string> sources, size_t cells) {
  PreflightCheck check;
  check.argv = {"/envs/user/bin/python", "train.py", "trainer.max_stepz=5", "--cfg", "job"};
  check.tree = "/wt/main";
  check.sources = std::move(sources);
  check.experiment = "cnn";
  check.branch = "main";
  check.cells = cells;
  return check;
}

TEST(PreflightFailureText, NamesEveryCellLineTheCheckItsOutputAndWhatToChange) {
  const std::vector<PreflightCheck> checks{check_of({"tasks.csv:2", "tasks.csv:4"}, 3),
                                           check_of({"tasks.csv:3"}, 1)};
  PreflightOutcome failed;
  failed.status = "exit status 1";
  failed.tail = "Could not override 'trainer.max_stepz'.\nKey 'max_stepz' is not in struct";
  PreflightOutcome passed;
  passed.ok = true;
  const std::string text = preflight_failure_text(checks, {failed, passed}, "pass --no-preflight");
  EXPECT_NE(text.find("preflight: 1 of 2 program configurations failed its check; no cell has "
                      "run"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tasks.csv:2, tasks.csv:4 (experiment cnn, branch main, 3 cells): exit "
                      "status 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  check: /envs/user/bin/python train.py trainer.max_stepz=5 --cfg job\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  in: /wt/main\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    Key 'max_stepz' is not in struct\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("tasks.csv:3"), std::string::npos) << "a passed check is not named";
  EXPECT_NE(text.find("What to change: correct the row or experiment named above"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("preflight_timeout_s"), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("; pass --no-preflight.")) << text;
}

TEST(PreflightFailureText, ATimeoutSaysToRaiseTheLimitAndAllPassedIsEmpty) {
  const std::vector<PreflightCheck> checks{check_of({"m.yaml:9"}, 1)};
  PreflightOutcome slow;
  slow.timed_out = true;
  slow.status = "timed out after 60 s";
  EXPECT_NE(
      preflight_failure_text(checks, {slow}, "hint").find("raise program.preflight_timeout_s"),
      std::string::npos);
  PreflightOutcome passed;
  passed.ok = true;
  passed.wall_s = 1.5;
  EXPECT_EQ(preflight_failure_text(checks, {passed}, "hint"), "");
  EXPECT_EQ(preflight_summary(checks, {passed}, 1.6, 1),
            "preflight: 1 of 1 configuration of 1 program cell passed in 1.6 s (1.5 s each, 1 at a "
            "time)");
  EXPECT_EQ(preflight_summary({}, {}, 0, 1), "");
}

TEST(PreflightJobs, OnePerCoreAtMostEightAtLeastOne) {
  EXPECT_EQ(preflight_jobs(1, 16), 1U);
  EXPECT_EQ(preflight_jobs(5, 2), 2U);
  EXPECT_EQ(preflight_jobs(20, 64), kPreflightMaxJobs);
  EXPECT_EQ(preflight_jobs(3, 0), 1U) << "hardware_concurrency() may not know";
}

class RunPreflightCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("scalebench_preflight_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  [[nodiscard]] PreflightCheck shell(const std::string& script) const {
    PreflightCheck check = check_of({"m.yaml:9"}, 1);
    check.argv = {"sh", "-c", script};
    check.tree = root_;
    check.environment = {{"SCALEBENCH_PREFLIGHT", "1"}};
    return check;
  }

  fs::path root_;
};

TEST_F(RunPreflightCheck, RunsInTheTreeWithoutTheLaunchersVariablesAndKeepsStderrsTail) {
  ::setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  const auto ok = run_preflight_check(
      shell("test \"$SCALEBENCH_PREFLIGHT\" = 1 && test -z \"$OMPI_COMM_WORLD_RANK\" && "
            "test \"$(pwd -P)\" = \"$(cd " +
            root_.string() + " && pwd -P)\""));
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  EXPECT_TRUE(ok.ok) << ok.status << ok.tail;

  const PreflightCheck check =
      shell("echo 'the config' ; echo \"Key 'max_stepz' is not in struct\" >&2; exit 1");
  const auto failed = run_preflight_check(check);
  EXPECT_FALSE(failed.ok);
  EXPECT_EQ(failed.status, "exit status 1");
  EXPECT_EQ(failed.tail, "Key 'max_stepz' is not in struct\n");
  append_preflight_log(root_ / "logs" / "preflight.log", check, failed);
  std::ifstream log(root_ / "logs" / "preflight.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("==== preflight of m.yaml:9 in "), std::string::npos) << text;
  EXPECT_NE(text.find("the config\nKey 'max_stepz' is not in struct\n==== FAILED: exit status 1\n"),
            std::string::npos)
      << text;
}

TEST_F(RunPreflightCheck, ATimeoutOrAMissingProgramIsAFailedCheckNotAnException) {
  PreflightCheck slow = shell("sleep 30");
  slow.timeout_s = 0.3;
  const auto timed_out = run_preflight_check(slow);
  EXPECT_FALSE(timed_out.ok);
  EXPECT_TRUE(timed_out.timed_out);
  EXPECT_LT(timed_out.wall_s, 10.0);

  PreflightCheck missing = shell("");
  missing.argv = {"/nonexistent/python", "train.py"};
  const auto not_started = run_preflight_check(missing);
  EXPECT_FALSE(not_started.ok);
  EXPECT_TRUE(not_started.status.starts_with("could not start: ")) << not_started.status;
}

TEST_F(RunPreflightCheck, EveryCheckRunsAndAFailureThrowsWithTheTextOfAll) {
  const fs::path tree = root_;
  std::vector<CellSpec> cells;
  for (const auto& [source, code] : std::vector<std::pair<std::string, std::string>>{
           {"tasks.csv:2", "exit 0"},
           {"tasks.csv:3", "echo typo-one >&2; exit 1"},
           {"tasks.csv:4", "echo typo-two >&2; exit 2"}}) {
    CellSpec cell = program_cell(source, "main", 8);
    cell.program.python.clear();
    cell.program.command = {"sh", "-c", code};
    cells.push_back(cell);
  }
  const PreflightContext in_root{.tree_of = [&](const CellSpec&) { return tree; },
                                 .scratch_dir = root_,
                                 .caller_path = "/usr/bin:/bin"};
  std::vector<std::string> notes;
  try {
    // `sh -c CODE --cfg job`: the extra arguments are the script's $0 and $1, unused.
    (void)preflight_program_cells(cells, in_root, {}, "hint",
                                  [&](const std::string& line) { notes.push_back(line); });
    FAIL() << "expected PreflightError";
  } catch (const PreflightError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("2 of 3 program configurations failed"), std::string::npos) << text;
    EXPECT_NE(text.find("tasks.csv:3 (experiment cnn, branch main): exit status 1"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("typo-one"), std::string::npos) << text;
    EXPECT_NE(text.find("tasks.csv:4 (experiment cnn, branch main): exit status 2"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("typo-two"), std::string::npos) << text;
  }
  EXPECT_EQ(notes.size(), 3U);
  cells.resize(1);
  EXPECT_TRUE(preflight_program_cells(cells, in_root, {}, "hint", [](const std::string&) {
              }).starts_with("preflight: 1 of 1 configuration of 1 program cell passed in "));
}

}  // namespace
}  // namespace scalebench
