#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "common/base/error.h"
#include "common/cell/cell_spec.h"
#include "common/cell/program.h"
#include "matrix/matrix.h"
#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

TEST(ProgramPlaceholders, NamesAndBracesAreParsedInOrder) {
  EXPECT_EQ(placeholder_names("--bs={batch_size} {{literal}} {precision}"),
            (std::vector<std::string>{"batch_size", "precision"}));
  EXPECT_TRUE(placeholder_names("plain; $(rm -rf /)").empty());
  EXPECT_THROW(placeholder_names("{unclosed"), std::invalid_argument);
  EXPECT_THROW(placeholder_names("lone } brace"), std::invalid_argument);
}

TEST(ProgramPlaceholders, SubstitutionIsTextualAndRefusesUnknownNames) {
  const std::map<std::string, std::string> values{{"batch_size", "32"}, {"x", "a;b $(c)"}};
  EXPECT_EQ(substitute_placeholders("--bs={batch_size}", values), "--bs=32");
  EXPECT_EQ(substitute_placeholders("{x}", values), "a;b $(c)");
  EXPECT_EQ(substitute_placeholders("{{batch_size}}", values), "{batch_size}");
  EXPECT_THROW(substitute_placeholders("{nope}", values), std::invalid_argument);
}

TEST(ProgramPlaceholders, EverySettingAndTheCellNamesAreKnown) {
  for (const char* name : {"batch_size", "precision", "iterations", "warmup", "seed", "device",
                           "world_size", "branch", "experiment", "output_dir", "cell_id"}) {
    EXPECT_TRUE(is_program_placeholder(name)) << name;
  }
  EXPECT_FALSE(is_program_placeholder("batchsize"));
  CellSpec cell;
  cell.batch_size = 8;
  cell.experiment = "e";
  const auto values = placeholder_values(cell, "/out", "cpu");
  EXPECT_EQ(values.at("batch_size"), "8");
  EXPECT_EQ(values.at("experiment"), "e");
  EXPECT_EQ(values.at("output_dir"), "/out");
  EXPECT_EQ(values.at("device"), "cpu");
  EXPECT_EQ(values.at("precision"), "fp32");
}

// Note [Program profiles]: {steps} holds the profiled steps after the measured ones;
// {warmup} and {iterations} stay the counts of the measured figures.
TEST(ProgramPlaceholders, StepsHoldWarmupMeasuredAndProfiledSteps) {
  CellSpec cell;
  cell.warmup_iterations = 2;
  cell.measured_iterations = 20;
  EXPECT_EQ(placeholder_values(cell, "/out", "cpu").at("steps"), "22");
  cell.profile_steps = 3;
  const auto values = placeholder_values(cell, "/out", "cpu");
  EXPECT_EQ(values.at("steps"), "25");
  EXPECT_EQ(values.at("iterations"), "20");
  EXPECT_EQ(values.at("warmup"), "2");
}

TEST(ProgramPlaceholders, OnlyProgramCellsCarryTheProgramInTheirIdentity) {
  CellSpec model_cell;
  const std::string before = compute_cell_id(model_cell);
  CellSpec program_cell;
  program_cell.program.command = {"python", "train.py"};
  EXPECT_NE(compute_cell_id(program_cell), before);
  EXPECT_EQ(compute_cell_id(model_cell), before);
  const auto round_trip = cell_spec_from_json(to_json(finalize_cell_id(program_cell)));
  EXPECT_EQ(round_trip.program, program_cell.program);
}

TEST(ProgramPython, TheInterpreterReplacesABarePythonAndFillsItsPlaceholder) {
  ProgramSpec program;
  program.command = {"python", "train.py", "--interpreter={python}"};
  const std::map<std::string, std::string> values;
  // Without python: the command is run as written, {python} is python3.
  EXPECT_EQ(program_argv(program, values),
            (std::vector<std::string>{"python", "train.py", "--interpreter=python3"}));
  program.python = "/envs/mine/bin/python";
  EXPECT_EQ(program_argv(program, values),
            (std::vector<std::string>{"/envs/mine/bin/python", "train.py",
                                      "--interpreter=/envs/mine/bin/python"}));
  program.command = {"torchrun", "--nproc-per-node=1", "train.py"};  // not an interpreter
  EXPECT_EQ(program_argv(program, values).front(), "torchrun");
  // python: enters the identity only when given (the ids of earlier program cells stay).
  CellSpec cell;
  cell.program.command = {"python3", "t.py"};
  const std::string without = compute_cell_id(cell);
  cell.program.python = "/envs/mine/bin/python";
  EXPECT_NE(compute_cell_id(cell), without);
  EXPECT_EQ(cell_spec_from_json(to_json(finalize_cell_id(cell))).program.python,
            cell.program.python);
}

TEST(ProgramPython, ARelativePathIsTheMatrixFilesAndAMissingOneIsAnErrorAtItsLine) {
  const std::string head =
      "name: p\n"
      "defaults: {device: cpu}\n"
      "sweep: {modes: [train], batch_sizes: [4]}\n"
      "experiments:\n"
      "  - name: mine\n"
      "    program:\n";
  const testing::TempDir dir;
  const auto python = dir.path() / "envs/a/bin/python";
  std::filesystem::create_directories(python.parent_path());
  std::ofstream(python) << "#!/bin/sh\n";
  std::filesystem::permissions(python, std::filesystem::perms::owner_all);
  const auto matrix =
      load_matrix_text(dir.path() / "m.yaml", head +
                                                  "      python: envs/a/bin/python\n"
                                                  "      command: [python, t.py]\n");
  ASSERT_EQ(matrix.cells.size(), 1U);
  EXPECT_EQ(matrix.cells[0].program.python, python.string());
  try {
    load_matrix_text(dir.path() / "m.yaml", head +
                                                "      python: /nonexistent/bin/python\n"
                                                "      command: [python, t.py]\n");
    FAIL() << "a missing interpreter was accepted";
  } catch (const MatrixError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("m.yaml:7:7: experiments[0].program: program.python: "),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("/nonexistent/bin/python is not an executable file"), std::string::npos)
        << message;
  }
}

TEST(ProgramPlaceholders, KnownNamesAreFilledFirstAndTheRestIsLeftForTheCell) {
  const std::map<std::string, std::string> row{{"trainer", "cpu"}, {"odd", "a{b}"}};
  EXPECT_EQ(substitute_known_placeholders("trainer={trainer} bs={batch_size} {{x}} {odd}", row),
            "trainer=cpu bs={batch_size} {{x}} a{{b}}");
  EXPECT_EQ(substitute_placeholders(substitute_known_placeholders("{odd}", row), {}), "a{b}");
}

/// Writes `files` (name -> text) into `dir` and loads `matrix` from it.
ExpandedMatrix load_with(const testing::TempDir& dir,
                         const std::map<std::string, std::string>& files,
                         const std::string& matrix) {
  for (const auto& [name, text] : files) std::ofstream(dir.path() / name) << text;
  return load_matrix(dir.path() / matrix);
}

TEST(CytodlProgramRows, ATemplateNextToTheTaskFileRunsTheRealScriptWithEachRowsOverrides) {
  const testing::TempDir dir;
  const std::string tasks =
      "branch,experiment,trainer,max_epochs,batch_size,overrides\n"
      "main,im2im/segmentation,cpu,3,4,\n"
      "opt,im2im/segmentation,cpu,3,4,\"trainer.precision=bf16-mixed trainer.devices=2 "
      "model.width=8 +callbacks.x={a:1} scalebench.warmup=1\"\n";
  const std::string program =
      "command: [python, train.py, \"experiment={experiment}\", \"trainer={trainer}\",\n"
      "          \"trainer.max_epochs={max_epochs}\", \"data.batch_size={batch_size}\",\n"
      "          \"trainer.devices={local_world_size}\", \"{overrides}\"]\n";
  const auto matrix =
      load_with(dir, {{"tasks.csv", tasks}, {"tasks.program.yaml", program}}, "tasks.csv");
  ASSERT_EQ(matrix.cells.size(), 2U);
  EXPECT_TRUE(matrix.warnings.empty()) << matrix.warnings.front();  // no stand-in
  const CellSpec& main = matrix.cells[0].branch == "main" ? matrix.cells[0] : matrix.cells[1];
  const CellSpec& opt = matrix.cells[0].branch == "main" ? matrix.cells[1] : matrix.cells[0];
  EXPECT_TRUE(main.model.zoo.empty());
  EXPECT_EQ(
      main.program.command,
      (std::vector<std::string>{"python", "train.py", "experiment={experiment}", "trainer=cpu",
                                "trainer.max_epochs=3", "data.batch_size={batch_size}",
                                "trainer.devices={local_world_size}"}));
  // The overrides scalebench knows set the cell; all but scalebench.* and the layout are
  // passed on, one argv element each, braces kept literal.
  EXPECT_EQ(opt.precision, Precision::kBf16);
  EXPECT_EQ(opt.world_size, 2);
  EXPECT_EQ(opt.warmup_iterations, 1);
  const std::vector<std::string> tail(opt.program.command.end() - 3, opt.program.command.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"trainer.precision=bf16-mixed", "model.width=8",
                                            "+callbacks.x={{a:1}}"}));
  auto values = placeholder_values(opt, "/out", "cpu");
  const auto argv = program_argv(opt.program, values);
  EXPECT_EQ(argv[2], "experiment=im2im/segmentation");
  EXPECT_EQ(argv.back(), "+callbacks.x={a:1}");
}

TEST(CytodlProgramRows, MaxEpochsMinusOneIsLightningsNoLimitForAProgramOnly) {
  // A template's program takes -1 (no epoch limit: its steps end the fit, as docs/programs.md
  // advises when an epoch is shorter than the steps); a stand-in row needs a positive count.
  const testing::TempDir dir;
  const std::string head = "branch,experiment,trainer,max_epochs,batch_size,overrides\n";
  const auto matrix =
      load_with(dir,
                {{"t.csv", head + "main,im2im/segmentation,cpu,-1,4,\n"},
                 {"t.program.yaml", "command: [python, train.py, \"e={max_epochs}\"]\n"}},
                "t.csv");
  ASSERT_EQ(matrix.cells.size(), 1U);
  EXPECT_EQ(matrix.cells[0].program.command,
            (std::vector<std::string>{"python", "train.py", "e=-1"}));
  std::filesystem::remove(dir.path() / "t.program.yaml");
  try {
    load_with(dir, {}, "t.csv");
    FAIL() << "a stand-in row took max_epochs -1";
  } catch (const MatrixError& e) {
    EXPECT_NE(std::string(e.what()).find("t.csv:2:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected a positive integer, got '-1'"),
              std::string::npos)
        << e.what();
  }
}

TEST(CytodlProgramRows, WithoutATemplateEveryRowIsAStandInAndTheFileSaysSo) {
  const testing::TempDir dir;
  const auto matrix = load_with(dir,
                                {{"t.csv",
                                  "branch,experiment,trainer,max_epochs,batch_size,overrides\n"
                                  "main,im2im/segmentation,cpu,3,4,\n"}},
                                "t.csv");
  ASSERT_EQ(matrix.warnings.size(), 1U);
  EXPECT_NE(matrix.warnings[0].find("built-in stand-in model (unet3d)"), std::string::npos);
  EXPECT_NE(matrix.warnings[0].find("t.program.yaml"), std::string::npos) << matrix.warnings[0];
  // A broken template is an error of the template, at its line.
  try {
    load_with(dir, {{"t.program.yaml", "command: [python, \"x{overrides}\"]\nbogus: 1\n"}},
              "t.csv");
    FAIL() << "a template with an unknown key was accepted";
  } catch (const MatrixError& e) {
    EXPECT_NE(std::string(e.what()).find("t.program.yaml:2:"), std::string::npos) << e.what();
  }
}

TEST(CytodlProgramRows, RowsCanAskForTheAccuracyCheckAgainstABaselineBranch) {
  // Note [Task file baseline]: the matrix's `baseline:` from the rows' overrides, which are
  // not passed on to the program.
  const testing::TempDir dir;
  const std::string head = "branch,experiment,trainer,max_epochs,batch_size,overrides\n";
  const std::string program = "command: [python, train.py, \"{overrides}\"]\n";
  const auto matrix =
      load_with(dir,
                {{"t.csv", head + "main,im2im/segmentation,cpu,1,4,\"scalebench.validate=true\"\n"
                                  "opt,im2im/segmentation,cpu,1,4,\"scalebench.validate=true "
                                  "scalebench.baseline.branch=main "
                                  "scalebench.baseline.metrics=[val/loss,train_loss]\"\n"},
                 {"t.program.yaml", program}},
                "t.csv");
  ASSERT_EQ(matrix.cells.size(), 2U);
  EXPECT_EQ(matrix.baseline.branch, "main");
  EXPECT_EQ(matrix.baseline.metrics, (std::vector<std::string>{"val/loss", "train_loss"}));
  for (const auto& cell : matrix.cells) {
    EXPECT_TRUE(cell.validate);
    EXPECT_EQ(cell.program.command, (std::vector<std::string>{"python", "train.py"}));
  }
  const auto refused = [&](const std::string& rows, const std::string& expected) {
    try {
      load_with(dir, {{"t.csv", head + rows}}, "t.csv");
      ADD_FAILURE() << "accepted: " << rows;
    } catch (const MatrixError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  refused(
      "main,im2im/segmentation,cpu,1,4,\"scalebench.baseline.branch=main\"\n"
      "opt,im2im/segmentation,cpu,1,4,\"scalebench.baseline.branch=opt\"\n",
      "t.csv:3:");
  refused(
      "main,im2im/segmentation,cpu,1,4,\"scalebench.baseline.branch=main\"\n"
      "opt,im2im/segmentation,cpu,1,4,\"scalebench.baseline.branch=opt\"\n",
      "differs from an earlier row's (line 2)");
  refused("opt,im2im/segmentation,cpu,1,4,\"scalebench.baseline.branch=mian\"\n",
          "scalebench.baseline.branch=mian is no row's branch (opt)");
}

}  // namespace
}  // namespace scalebench
