// `preflight:` and `preflight_timeout_s:` of a program (Note [Program preflight] in
// program/preflight/program_preflight.h): read from a matrix and from a CytoDL program template,
// checked by validate, expanded per cell, and kept out of the cell's identity.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/cell/cell_spec.h"
#include "common/cell/program.h"
#include "matrix/matrix.h"
#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

ExpandedMatrix load_with(const testing::TempDir& dir,
                         const std::map<std::string, std::string>& files,
                         const std::string& matrix) {
  for (const auto& [name, text] : files) std::ofstream(dir.path() / name) << text;
  return load_matrix(dir.path() / matrix);
}

std::string program_matrix(const std::string& program_keys) {
  return "name: p\n"
         "sweep: {batch_sizes: [8, 16]}\n"
         "experiments:\n"
         "  - name: cnn\n"
         "    program:\n"
         "      command: [python, train.py, \"data.batch_size={batch_size}\"]\n" +
         program_keys;
}

TEST(ProgramPreflightSpec, NoneIsTheDefaultHydraAndATemplateAreRead) {
  const testing::TempDir dir;
  auto matrix = load_with(dir, {{"m.yaml", program_matrix("")}}, "m.yaml");
  EXPECT_EQ(matrix.cells.at(0).program.preflight, PreflightSpec{});
  EXPECT_EQ(matrix.cells.at(0).program.preflight.timeout_s, 60.0);

  matrix = load_with(dir,
                     {{"m.yaml", program_matrix("      preflight: hydra\n"
                                                "      preflight_timeout_s: 20\n")}},
                     "m.yaml");
  const PreflightSpec& hydra = matrix.cells.at(1).program.preflight;
  EXPECT_EQ(hydra.kind, PreflightKind::kHydra);
  EXPECT_EQ(hydra.timeout_s, 20.0);
  auto values = placeholder_values(matrix.cells.at(1), "/out", "cpu");
  EXPECT_EQ(preflight_argv(matrix.cells.at(1).program, values),
            (std::vector<std::string>{"python", "train.py", "data.batch_size=16", "--cfg", "job"}));

  matrix = load_with(
      dir, {{"m.yaml", program_matrix("      preflight: [python, check.py, \"{batch_size}\"]\n")}},
      "m.yaml");
  const ProgramSpec& own = matrix.cells.at(0).program;
  EXPECT_EQ(own.preflight.kind, PreflightKind::kCommand);
  values = placeholder_values(matrix.cells.at(0), "/out", "cpu");
  EXPECT_EQ(preflight_argv(own, values), (std::vector<std::string>{"python", "check.py", "8"}));

  matrix = load_with(dir, {{"m.yaml", program_matrix("      preflight: none\n")}}, "m.yaml");
  EXPECT_EQ(matrix.cells.at(0).program.preflight.kind, PreflightKind::kNone);
  EXPECT_TRUE(preflight_argv(matrix.cells.at(0).program, values).empty());
}

TEST(ProgramPreflightSpec, BadValuesAreErrorsOfValidateAtTheirLine) {
  const testing::TempDir dir;
  for (const auto& [keys, expected] : std::vector<std::pair<std::string, std::string>>{
           {"      preflight: hydro\n", "m.yaml:7:"},
           {"      preflight_timeout_s: 0\n", "m.yaml:7:"},
           {"      preflight: [python, check.py, \"{batch_sise}\"]\n",
            "m.yaml:7:37: experiments[0].program.preflight[2]: unknown placeholder {batch_sise}"},
       }) {
    try {
      load_with(dir, {{"m.yaml", program_matrix(keys)}}, "m.yaml");
      FAIL() << "accepted: " << keys;
    } catch (const MatrixError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << keys << e.what();
    }
  }
}

// Issue 54: an unknown placeholder is reported at the list item that holds it, with the
// closest name (setting keys included: {batchsize} -> {batch_size}), and in the same pass as
// the file's schema errors.
TEST(ProgramPreflightSpec, UnknownPlaceholdersAreFoundWithTheSchemasErrorsAtTheirItem) {
  const testing::TempDir dir;
  const std::string matrix =
      "name: p\n"
      "sweep: {batch_sizes: [8], world_sizes: 2}\n"
      "experiments:\n"
      "  - name: cnn\n"
      "    program:\n"
      "      command: [python, train.py, \"--batch={batchsize}\"]\n"
      "      env: {SEED: \"{sed}\"}\n";
  try {
    load_with(dir, {{"m.yaml", matrix}}, "m.yaml");
    FAIL() << "accepted";
  } catch (const MatrixError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("m.yaml:2:"), std::string::npos) << "the schema error: " << text;
    EXPECT_NE(text.find("m.yaml:6:35: experiments[0].program.command[2]: unknown placeholder "
                        "{batchsize}"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("did you mean {batch_size}?"), std::string::npos) << text;
    EXPECT_NE(text.find("m.yaml:7:"), std::string::npos) << text;
    EXPECT_NE(text.find("experiments[0].program.env.SEED: unknown placeholder {sed}"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("did you mean {seed}?"), std::string::npos) << text;
  }
}

TEST(ProgramPreflightSpec, HowAConfigurationIsCheckedIsNotPartOfTheCellsIdentity) {
  CellSpec cell;
  cell.program.command = {"python", "train.py"};
  const std::string id = compute_cell_id(cell);
  cell.program.preflight = {.kind = PreflightKind::kHydra, .command = {}, .timeout_s = 5};
  EXPECT_EQ(compute_cell_id(cell), id);
  EXPECT_EQ(cell_spec_from_json(to_json(finalize_cell_id(cell))).program.preflight, PreflightSpec{})
      << "rank 0's check travels with no cell";
}

TEST(ProgramPreflightSpec, ATemplatesOwnCheckSeesTheRowAsItsCommandDoes) {
  const testing::TempDir dir;
  const std::string tasks =
      "branch,experiment,trainer,max_epochs,batch_size,overrides\n"
      "main,cnn,cpu,3,4,model.width=8 trainer.max_stepz=5\n";
  const std::string program =
      "command: [python, train.py, \"experiment={experiment}\", \"{overrides}\"]\n"
      "preflight: [python, check.py, \"trainer={trainer}\", \"{overrides}\"]\n";
  const auto matrix = load_with(dir, {{"t.csv", tasks}, {"t.program.yaml", program}}, "t.csv");
  ASSERT_EQ(matrix.cells.size(), 1U);
  const CellSpec& cell = matrix.cells[0];
  EXPECT_EQ(cell.source, (dir.path() / "t.csv").string() + ":2");
  EXPECT_EQ(cell.program.preflight.kind, PreflightKind::kCommand);
  const auto values = placeholder_values(cell, "/out", "cpu");
  EXPECT_EQ(preflight_argv(cell.program, values),
            (std::vector<std::string>{"python", "check.py", "trainer=cpu", "model.width=8",
                                      "trainer.max_stepz=5"}));

  const auto hydra = load_with(
      dir, {{"t.program.yaml", "command: [python, train.py, \"{overrides}\"]\npreflight: hydra\n"}},
      "t.csv");
  EXPECT_EQ(preflight_argv(hydra.cells.at(0).program, values),
            (std::vector<std::string>{"python", "train.py", "model.width=8", "trainer.max_stepz=5",
                                      "--cfg", "job"}));
}

}  // namespace
}  // namespace scalebench
