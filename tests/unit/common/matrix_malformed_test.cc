// Table-driven: every file under tests/data/matrix/malformed/ must be rejected with a
// MatrixError that names the file, the expected line and a telling phrase.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/matrix.h"

namespace scalebench {
namespace {

const std::filesystem::path kMalformedDir =
    std::filesystem::path(SCALEBENCH_TEST_DATA_DIR) / "matrix" / "malformed";

struct MalformedCase {
  const char* file;
  int line;            ///< expected line in the message; 0 = a whole-file problem (no line)
  const char* phrase;  ///< expected part of the message
};

std::ostream& operator<<(std::ostream& out, const MalformedCase& c) { return out << c.file; }

const MalformedCase kCases[] = {
    {"bad_device.yaml", 8, "auto, cpu, cuda"},
    {"bad_lr.yaml", 7, "lr must be > 0"},
    {"bad_mode.yaml", 7, "train, infer"},
    {"bad_optimizer.yaml", 7, "sgd, adam, adamw"},
    {"bad_precision.yaml", 4, "fp32, fp16, bf16"},
    {"bad_shape_rank.yaml", 7, "dimensions"},
    {"bad_shape_unet.yaml", 7, "multiples of 8"},
    {"bad_shape_vit.yaml", 7, "multiples of 16"},
    {"batch_size_absurd.yaml", 3, "absurd"},
    {"batch_size_float.yaml", 3, "expected an integer"},
    {"batch_size_negative.yaml", 3, "too small"},
    {"batch_size_zero.yaml", 3, "too small"},
    {"batch_sizes_empty.yaml", 3, "empty"},
    {"batch_sizes_repeated.yaml", 3, "repeated"},
    {"batch_sizes_string.yaml", 3, "expected a list"},
    {"bom.yaml", 1, "byte-order mark"},
    {"bool_as_string.yaml", 7, "expected true or false"},
    {"branch_dash.yaml", 8, "not a valid value"},
    {"branch_dotdot.yaml", 10, "contains '..'"},
    {"branch_reflog.yaml", 8, "contains '@{'"},
    {"branch_shell.yaml", 10, "is refused"},
    {"branches_without_repo.yaml", 7, "need a repo"},
    {"prepare_timeout_zero.yaml", 9, "prepare_timeout_s"},
    {"prepare_without_repo.yaml", 4, "needs repo and branches"},
    {"bucket_absurd.yaml", 8, "absurd"},
    {"csv_bad_batch.csv", 3, "positive integer"},
    {"csv_bad_epochs.csv", 2, "positive integer"},
    {"csv_bad_override.csv", 2, "supported keys"},
    {"csv_bad_precision.csv", 2, "bad value"},
    {"csv_bad_trainer.csv", 2, "unknown trainer"},
    {"csv_branch_semicolon.csv", 3, "not a git ref: it"},
    {"csv_duplicate_row.csv", 4, "duplicates the same cell"},
    {"csv_empty_branch.csv", 2, "not a git ref"},
    {"csv_header_only.csv", 1, "no rows"},
    {"csv_infer_bad_batch.csv", 2, "positive integer"},
    {"csv_missing_header.csv", 1, "not a CytoDL task header"},
    {"csv_ragged_row.csv", 3, "row has 4 fields"},
    {"csv_text_after_quote.csv", 2, "after a closing quote"},
    {"csv_unclosed_quote.csv", 2, "unclosed quote"},
    {"csv_unknown_experiment.csv", 2, "unknown model"},
    {"csv_world_too_big.csv", 2, "above the limit"},
    {"data_bad.yaml", 7, "synthetic"},
    {"duplicate_experiment_name.yaml", 7, "already used on line 5"},
    {"duplicate_key_nested.yaml", 4, "duplicate key"},
    {"duplicate_key_top.yaml", 7, "duplicate key"},
    {"empty.yaml", 0, "the file is empty"},
    {"exclude_all.yaml", 0, "no cells"},
    {"exclude_empty_rule.yaml", 8, "mapping is empty"},
    {"experiments_empty.yaml", 4, "empty"},
    {"iterations_absurd.yaml", 8, "absurd"},
    {"iterations_zero.yaml", 7, "too small"},
    {"latin1.yaml", 5, "invalid UTF-8"},
    {"missing_experiments.yaml", 1, "missing required key 'experiments'"},
    {"missing_model.yaml", 5, "missing required key 'model'"},
    {"mode_and_modes.yaml", 8, "keep one of them"},
    {"model_bad_mapping.yaml", 6, "did you mean 'torchscript'"},
    {"model_list.yaml", 6, "zoo model name"},
    {"momentum_adam.yaml", 7, "only to sgd"},
    {"nccl_on_cpu.yaml", 9, "needs device cuda"},
    {"no_batch_sizes.yaml", 3, "no batch sizes"},
    {"num_classes_negative.yaml", 7, "too small"},
    {"samples_too_small.yaml", 8, "every rank needs"},
    {"scheduling_bad.yaml", 7, "exclusive, packed"},
    {"shape_zero_dim.yaml", 7, "too small"},
    {"tab_indent.yaml", 3, "tab in indentation"},
    {"timeout_string.yaml", 8, "expected a number"},
    {"timeout_zero.yaml", 8, "timeout_s must be > 0"},
    {"top_level_list.yaml", 1, "top level must be a mapping"},
    {"torchscript_no_shape.yaml", 5, "no default input shape"},
    {"unclosed_bracket.yaml", 4, "YAML syntax error"},
    {"unclosed_quote.yaml", 1, "unclosed quote"},
    {"unclosed_quote_nested.yaml", 5, "unclosed quote"},
    {"unknown_defaults_key.yaml", 8, "did you mean 'warmup'"},
    {"unknown_experiment_key.yaml", 7, "did you mean 'num_classes'"},
    {"unknown_model.yaml", 6, "did you mean 'resnet18'"},
    {"unknown_optimizer_key.yaml", 7, "unknown key 'learning_rate'"},
    {"unknown_sweep_key.yaml", 3, "did you mean 'batch_sizes'"},
    {"unknown_top_key.yaml", 7, "did you mean 'experiments'"},
    {"warmup_negative.yaml", 7, "too small"},
    {"whitespace_only.yaml", 0, "the file is empty"},
    {"world_size_too_big.yaml", 4, "above the limit"},
    {"world_size_zero.yaml", 4, "too small"},
};

class MalformedMatrixTest : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedMatrixTest, RejectedWithFileLineAndReason) {
  const auto& param = GetParam();
  const auto path = kMalformedDir / param.file;
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  try {
    load_matrix(path);
    FAIL() << "expected MatrixError for " << param.file;
  } catch (const MatrixError& e) {
    const std::string message = e.what();
    const std::string located =
        path.string() + (param.line > 0 ? ":" + std::to_string(param.line) + ":" : ": ");
    EXPECT_NE(message.find(located), std::string::npos) << "expected '" << located << "' in:\n"
                                                        << message;
    EXPECT_NE(message.find(param.phrase), std::string::npos)
        << "expected '" << param.phrase << "' in:\n"
        << message;
  }
}

INSTANTIATE_TEST_SUITE_P(AllFiles, MalformedMatrixTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<MalformedCase>& info) {
                           std::string name = info.param.file;
                           for (auto& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(MalformedMatrixTest, EveryFileInTheFolderIsInTheTable) {
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kMalformedDir)) {
    ++files;
    const auto name = entry.path().filename().string();
    bool listed = false;
    for (const auto& c : kCases) listed = listed || name == c.file;
    EXPECT_TRUE(listed) << name << " has no row in kCases";
  }
  EXPECT_GE(files, 40U);
}

TEST(MalformedMatrixTest, AllProblemsAreReportedNotJustTheFirst) {
  const std::string text =
      "name: t\nsweep:\n  batch_sizes: [0]\n  world_sizes: [0]\nexperiments:\n"
      "  - model: mlp\n    colour: red\n";
  try {
    load_matrix_text("multi.yaml", text);
    FAIL() << "expected MatrixError";
  } catch (const MatrixError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("multi.yaml:3:"), std::string::npos) << message;
    EXPECT_NE(message.find("multi.yaml:4:"), std::string::npos) << message;
    EXPECT_NE(message.find("multi.yaml:7:"), std::string::npos) << message;
  }
}

TEST(MalformedMatrixTest, MissingFileIsAMatrixError) {
  EXPECT_THROW(load_matrix(kMalformedDir / "does-not-exist.yaml"), MatrixError);
}

TEST(MalformedMatrixTest, UnknownExtensionIsAMatrixError) {
  EXPECT_THROW(load_matrix_text("matrix.toml", "a = 1"), MatrixError);
}

TEST(MalformedMatrixTest, ValidateCommandExitsTwo) {
  // The test binary is <build>/tests/common_unit_tests; the CLI is <build>/bin/scalebench.
  const auto binary = std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() /
                      "bin" / "scalebench";
  if (!std::filesystem::exists(binary)) GTEST_SKIP() << "no scalebench binary at " << binary;
  const std::string command = binary.string() + " validate " +
                              (kMalformedDir / "unknown_model.yaml").string() + " 2>/dev/null";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace scalebench
