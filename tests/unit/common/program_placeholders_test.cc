#include <gtest/gtest.h>

#include <stdexcept>

#include "common/cell/cell_spec.h"
#include "common/cell/program.h"

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

}  // namespace
}  // namespace scalebench
