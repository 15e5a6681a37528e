// Table-driven: every file under tests/data/matrix/malformed/, and every input generated
// at test time (kGeneratedCases), must be rejected with a MatrixError that names the file,
// the expected line and a telling phrase. The CLI tests check exit status 2 and that
// nothing is written.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/base/build_info.h"
#include "matrix/matrix.h"
#include "matrix/text.h"

namespace scalebench {
namespace {

const std::filesystem::path kMalformedDir =
    scalebench::build_info::source_dir() / "tests" / "data" / "matrix" / "malformed";

struct MalformedCase {
  const char* file;
  int line;            ///< expected line in the message; 0 = a whole-file problem (no line)
  const char* phrase;  ///< expected part of the message
};

std::ostream& operator<<(std::ostream& out, const MalformedCase& c) { return out << c.file; }

const MalformedCase kCases[] = {
    {"alias_bomb.yaml", 6, "takes the document past 100000 nodes"},
    {"alias_bomb_maps.yaml", 6, "takes the document past 100000 nodes"},
    {"alias_cycle.yaml", 3, "refers to a node that contains it"},
    {"aoti_no_shape.yaml", 6, "an AOTInductor package has no default input shape"},
    {"aoti_train.yaml", 4, "compiled for inference only"},
    {"bad_device.yaml", 8, "auto, cpu, cuda"},
    {"baseline_bare_branch.yaml", 2, "write baseline: {branch: main}"},
    {"baseline_unknown_branch.yaml", 4,
     "baseline branch 'mian' is not one of the matrix's branches"},
    {"bad_indentation.yaml", 4, "YAML syntax error"},
    {"bad_lr.yaml", 7, "lr must be > 0"},
    {"bad_mode.yaml", 7, "train, infer"},
    {"bad_optimizer.yaml", 7, "sgd, adam, adamw"},
    {"bad_precision.yaml", 4, "fp32, fp16, bf16"},
    {"bad_shape_rank.yaml", 7, "dimensions"},
    {"bad_shape_unet.yaml", 7, "multiples of 8"},
    {"bad_shape_vit.yaml", 7, "multiples of 16"},
    {"batch_size_2pow63.yaml", 3, "expected an integer"},
    {"batch_size_absurd.yaml", 3, "absurd"},
    {"batch_size_float.yaml", 3, "expected an integer"},
    {"batch_size_inf.yaml", 3, "expected an integer"},
    {"batch_size_int32_max.yaml", 3, "absurd"},
    {"batch_size_nan.yaml", 3, "expected an integer"},
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
    {"bucket_absurd.yaml", 8, "absurd"},
    {"bucket_bytes_zero.yaml", 7, "too small"},
    {"compile_model_file.yaml", 9, "exports a twin of a zoo model"},
    {"compile_train.yaml", 8, "runs inference only (an exported twin has no backward)"},
    {"compile_unknown.yaml", 7, "eager, torchscript, aoti"},
    {"control_char.yaml", 1, "control character 0x1b"},
    {"control_escape.yaml", 6, "expected an integer"},
    {"csv_bad_batch.csv", 3, "positive integer"},
    {"csv_bad_epochs.csv", 2, "positive integer"},
    {"csv_bad_override.csv", 2, "supported keys"},
    {"csv_bad_precision.csv", 2, "bad value"},
    {"csv_bad_trainer.csv", 2, "unknown trainer"},
    {"csv_batch_2pow63.csv", 2, "positive integer"},
    {"csv_batch_inf.csv", 2, "positive integer"},
    {"csv_batch_nan.csv", 2, "positive integer"},
    {"csv_batch_zero.csv", 2, "positive integer"},
    {"csv_branch_semicolon.csv", 3, "not a git ref: it"},
    {"csv_devices_overflow.csv", 2, "absurd"},
    {"csv_duplicate_row.csv", 4, "duplicates the same cell"},
    {"csv_empty_branch.csv", 2, "not a git ref"},
    {"csv_epochs_int32_max.csv", 2, "absurd"},
    {"csv_extra_column.csv", 1, "not a CytoDL task header"},
    {"csv_header_only.csv", 1, "no rows"},
    {"csv_infer_bad_batch.csv", 2, "positive integer"},
    {"csv_latin1.csv", 2, "invalid UTF-8"},
    {"csv_missing_header.csv", 1, "not a CytoDL task header"},
    {"csv_override_duplicate.csv", 2, "given twice"},
    {"csv_override_nan.csv", 2, "bad value in override"},
    {"csv_ragged_row.csv", 3, "row has 4 fields"},
    {"csv_text_after_quote.csv", 2, "after a closing quote"},
    {"csv_unclosed_quote.csv", 2, "unclosed quote"},
    {"csv_unknown_experiment.csv", 2, "unknown model"},
    {"csv_utf16.csv", 1, "invalid UTF-8"},
    {"csv_world_too_big.csv", 2, "above the limit"},
    {"data_bad.yaml", 7, "synthetic"},
    // fuzz_matrix_yaml: blank lines in a block scalar made the quote check loop for ever
    {"fuzz_block_scalar_blank_lines.yaml", 1, "unexpected character in block scalar"},
    {"deep_nesting.yaml", 3, "nested more than 64 levels"},
    {"duplicate_experiment_name.yaml", 7, "already used on line 5"},
    {"duplicate_key_experiment.yaml", 7, "duplicate key (first written on line 6)"},
    {"duplicate_key_nested.yaml", 4, "duplicate key"},
    {"duplicate_key_optimizer.yaml", 7, "duplicate key"},
    {"duplicate_key_top.yaml", 7, "duplicate key"},
    {"empty.yaml", 0, "the file is empty"},
    {"exclude_all.yaml", 0, "no cells"},
    {"exclude_empty_rule.yaml", 8, "mapping is empty"},
    {"experiments_empty.yaml", 4, "empty"},
    {"experiments_mapping.yaml", 5, "expected a list"},
    {"input_shape_huge.yaml", 7, "absurd"},
    {"iterations_2pow63.yaml", 7, "expected an integer"},
    {"iterations_absurd.yaml", 8, "absurd"},
    {"iterations_int32_max.yaml", 7, "absurd"},
    {"iterations_negative.yaml", 7, "too small"},
    {"iterations_zero.yaml", 7, "too small"},
    {"latin1.yaml", 5, "invalid UTF-8"},
    {"lr_nan.yaml", 7, "expected a number"},
    {"lr_negative_inf.yaml", 7, "expected a number"},
    {"missing_experiments.yaml", 1, "missing required key 'experiments'"},
    {"missing_model.yaml", 5, "missing required key 'model'"},
    {"mode_and_modes.yaml", 8, "keep one of them"},
    {"mode_bool.yaml", 7, "train, infer"},
    {"model_bad_mapping.yaml", 6, "did you mean 'torchscript'"},
    {"model_list.yaml", 6, "zoo model name"},
    {"momentum_above_one.yaml", 7, "momentum must be < 1"},
    {"momentum_adam.yaml", 7, "only to sgd"},
    {"name_list.yaml", 1, "expected a string"},
    {"nccl_on_cpu.yaml", 9, "needs device cuda"},
    {"no_batch_sizes.yaml", 3, "no batch sizes"},
    {"nul_byte.yaml", 3, "control character 0x00"},
    {"num_classes_2pow63.yaml", 7, "expected an integer"},
    {"num_classes_negative.yaml", 7, "too small"},
    {"overlong_utf8.yaml", 5, "invalid UTF-8"},
    {"precision_number.yaml", 3, "fp32, fp16, bf16"},
    {"prepare_timeout_zero.yaml", 9, "prepare_timeout_s"},
    {"prepare_without_repo.yaml", 4, "needs repo and branches"},
    {"samples_negative.yaml", 7, "too small"},
    {"samples_too_small.yaml", 8, "every rank needs"},
    {"scheduling_bad.yaml", 7, "exclusive, packed"},
    {"seed_2pow63.yaml", 7, "expected an integer"},
    {"seed_negative.yaml", 7, "too small"},
    {"shape_zero_dim.yaml", 7, "too small"},
    {"surrogate_utf8.yaml", 5, "invalid UTF-8"},
    {"tab_indent.yaml", 3, "tab in indentation"},
    {"timeout_inf.yaml", 7, "expected a number"},
    {"timeout_nan.yaml", 7, "expected a number"},
    {"timeout_negative.yaml", 7, "timeout_s must be > 0"},
    {"timeout_string.yaml", 8, "expected a number"},
    {"timeout_zero.yaml", 8, "timeout_s must be > 0"},
    {"top_level_list.yaml", 1, "top level must be a mapping"},
    {"torchscript_class_loss_no_classes.yaml", 5, "(loss auto) needs num_classes"},
    {"torchscript_no_shape.yaml", 5, "no default input shape"},
    {"unclosed_brace.yaml", 5, "YAML syntax error"},
    {"unclosed_bracket.yaml", 4, "YAML syntax error"},
    {"unclosed_quote.yaml", 1, "unclosed quote"},
    {"unclosed_quote_nested.yaml", 5, "unclosed quote"},
    {"unknown_defaults_key.yaml", 8, "did you mean 'warmup'"},
    {"unknown_exclude_key.yaml", 8, "unknown key 'colour'"},
    {"unknown_experiment_key.yaml", 7, "did you mean 'num_classes'"},
    {"unknown_model.yaml", 6, "did you mean 'resnet18'"},
    {"unknown_optimizer_key.yaml", 7, "unknown key 'learning_rate'"},
    {"unknown_sweep_key.yaml", 3, "did you mean 'batch_sizes'"},
    {"unknown_top_key.yaml", 7, "did you mean 'experiments'"},
    {"utf16.yaml", 1, "invalid UTF-8"},
    {"warmup_negative.yaml", 7, "too small"},
    {"weight_decay_inf.yaml", 7, "expected a number"},
    {"whitespace_only.yaml", 0, "the file is empty"},
    {"world_size_int32_max.yaml", 3, "absurd"},
    {"world_size_negative.yaml", 3, "too small"},
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

// Inputs too big to keep in the repository, made at test time: each must be refused by
// the bounds of Note [Input limits] (matrix/text.h) with file:line and the limit,
// without building what it describes. Before those bounds the alias bombs ran for minutes
// (the duplicate-key check walked every expansion) or took gigabytes.
struct GeneratedCase {
  const char* file;
  std::string (*text)();
  int line;  ///< expected line; -1 = the line where byte kMaxMatrixFileBytes falls
  const char* phrase;
};

std::ostream& operator<<(std::ostream& out, const GeneratedCase& c) { return out << c.file; }

std::string repeated(const std::string& item, size_t count, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < count; ++i) out += (i > 0 ? separator : "") + item;
  return out;
}

/// 40 anchors, each a list of 10 aliases of the one before: 10^40 nodes once expanded.
std::string alias_bomb() {
  std::string text = "l0: &l0 [" + repeated("lol", 10, ",") + "]\n";
  for (int i = 1; i < 40; ++i) {
    const std::string previous = "*l" + std::to_string(i - 1);
    text += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [" +
            repeated(previous, 10, ",") + "]\n";
  }
  return text + "experiments:\n  - model: mlp\n";
}

/// The same with mappings of 10 keys.
std::string alias_bomb_maps() {
  std::string text = "l0: &l0 {a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1, h: 1, i: 1, j: 1}\n";
  for (int i = 1; i < 40; ++i) {
    const std::string previous = "*l" + std::to_string(i - 1);
    text += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " {";
    for (char key = 'a'; key <= 'j'; ++key) {
      text += std::string(key == 'a' ? "" : ", ") + key + ": " + previous;
    }
    text += "}\n";
  }
  return text + "experiments:\n  - model: mlp\n";
}

std::string block_list() {
  return "name: t\nsweep:\n  batch_sizes:\n" + repeated("    - 8", 1001, "\n") +
         "\nexperiments:\n  - model: mlp\n";
}

std::string flow_list() {
  return "name: t\nsweep:\n  batch_sizes: [" + repeated("8", 2000000, ",") +
         "]\nexperiments:\n  - model: mlp\n";
}

std::string many_keys() {
  std::string text = "name: t\nexperiments:\n  - model: mlp\ndefaults:\n";
  for (int i = 0; i < 60000; ++i) text += "  k" + std::to_string(i) + ": 1\n";
  return text;
}

std::string deep_block() {
  std::string text;
  for (int i = 0; i < 100; ++i) text += std::string(2 * static_cast<size_t>(i), ' ') + "a:\n";
  return text;
}

std::string cross_product() {
  std::string batches;
  for (int b = 1; b <= 1000; ++b) batches += (b > 1 ? "," : "") + std::to_string(b);
  std::string worlds;
  for (int w = 1; w <= 200; ++w) worlds += (w > 1 ? "," : "") + std::to_string(w);
  return "name: t\nsweep:\n  batch_sizes: [" + batches + "]\n  world_sizes: [" + worlds +
         "]\nexperiments:\n  - model: mlp\n";
}

std::string huge_yaml() {
  return "experiments:\n  - model: mlp\n" +
         repeated("# " + std::string(97, 'x'), (kMaxMatrixFileBytes / 100) + 1, "\n") + "\n";
}

std::string huge_csv() {
  return "branch,experiment,trainer,max_epochs,batch_size,overrides\n" +
         repeated("main,mlp,cpu,5,8," + std::string(83, ' '), (kMaxMatrixFileBytes / 100) + 1,
                  "\n") +
         "\n";
}

std::string csv_rows() {
  std::string text = "branch,experiment,trainer,max_epochs,batch_size,overrides\n";
  for (int i = 1; i <= 10001; ++i) text += "main,mlp,cpu,5," + std::to_string(i) + ",\n";
  return text;
}

std::string csv_fields() {
  return "branch,experiment,trainer,max_epochs,batch_size,overrides\n" +
         repeated("x", 100000, ",") + "\n";
}

const GeneratedCase kGeneratedCases[] = {
    {"gen_alias_bomb.yaml", alias_bomb, 5, "takes the document past 100000 nodes"},
    {"gen_alias_bomb_maps.yaml", alias_bomb_maps, 5, "takes the document past 100000 nodes"},
    {"gen_block_list.yaml", block_list, 4, "more than 1000 entries"},
    {"gen_flow_list.yaml", flow_list, 3, "more than 1000 entries"},
    {"gen_many_keys.yaml", many_keys, 50000, "more than 100000 nodes"},
    {"gen_deep_block.yaml", deep_block, 65, "nested more than 64 levels"},
    {"gen_cross_product.yaml", cross_product, 6, "more than 100000 cells"},
    {"gen_huge.yaml", huge_yaml, -1, "larger than 16 MiB"},
    {"gen_huge.csv", huge_csv, -1, "larger than 16 MiB"},
    {"gen_csv_rows.csv", csv_rows, 10002, "more than 10000 rows"},
    {"gen_csv_fields.csv", csv_fields, 2, "more than 64 fields"},
};

class GeneratedMatrixTest : public ::testing::TestWithParam<GeneratedCase> {};

TEST_P(GeneratedMatrixTest, RefusedByItsBoundWithFileLineAndReason) {
  const auto& param = GetParam();
  const auto path = std::filesystem::path(::testing::TempDir()) / param.file;
  const std::string text = param.text();
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
  }
  int line = param.line;
  if (line < 0) {
    line = 1 + static_cast<int>(std::count(
                   text.begin(), text.begin() + static_cast<std::ptrdiff_t>(kMaxMatrixFileBytes),
                   '\n'));
  }
  try {
    load_matrix(path);
    FAIL() << "expected MatrixError for " << param.file;
  } catch (const MatrixError& e) {
    const std::string message = e.what();
    const std::string located = path.string() + ":" + std::to_string(line) + ":";
    EXPECT_NE(message.find(located), std::string::npos) << "expected '" << located << "' in:\n"
                                                        << message.substr(0, 2000);
    EXPECT_NE(message.find(param.phrase), std::string::npos)
        << "expected '" << param.phrase << "' in:\n"
        << message.substr(0, 2000);
    EXPECT_LT(message.size(), 1000U) << "one line per problem, not one per list entry";
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Generated, GeneratedMatrixTest, ::testing::ValuesIn(kGeneratedCases),
                         [](const ::testing::TestParamInfo<GeneratedCase>& info) {
                           std::string name = info.param.file;
                           for (auto& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// The corpus of issue 15: at least 100 malformed matrix and CytoDL files.
TEST(MalformedMatrixTest, CorpusHasAtLeastOneHundredFiles) {
  EXPECT_GE(std::size(kCases) + std::size(kGeneratedCases), 100U);
}

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

/// The CLI next to this test binary (<build>/tests/common_unit_tests): <build>/bin/scalebench,
/// else the Torch-free <build>/tests/mpi/scalebench_fake of the ASan build; "" when neither.
std::filesystem::path cli_binary() {
  const auto build = std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path();
  for (const auto& candidate :
       {build / "bin" / "scalebench", build / "tests/mpi/scalebench_fake"}) {
    if (std::filesystem::exists(candidate)) return candidate;
  }
  return {};
}

int exit_status_of(const std::string& command) {
  const int status = std::system(command.c_str());
  EXPECT_TRUE(WIFEXITED(status)) << command;
  return WEXITSTATUS(status);
}

TEST(MalformedMatrixTest, ValidateCommandExitsTwo) {
  const auto binary = cli_binary();
  if (binary.empty()) GTEST_SKIP() << "no scalebench or scalebench_fake binary";
  for (const char* file : {"unknown_model.yaml", "alias_bomb.yaml", "csv_bad_batch.csv",
                           "utf16.yaml", "deep_nesting.yaml"}) {
    EXPECT_EQ(2, exit_status_of(binary.string() + " validate " + (kMalformedDir / file).string() +
                                " >/dev/null 2>&1"))
        << file;
  }
}

// `run` needs rank 0 and a worker: under mpiexec -n 2 when there is one. The output folder
// exists, so that only what run itself writes would show up in it.
TEST(MalformedMatrixTest, RunRefusesWithExitTwoAndWritesNothing) {
  const auto binary = cli_binary();
  if (binary.empty()) GTEST_SKIP() << "no scalebench or scalebench_fake binary";
  if (std::system("command -v mpiexec >/dev/null 2>&1") != 0) GTEST_SKIP() << "no mpiexec";
  const auto dir = std::filesystem::path(::testing::TempDir()) / "malformed_run";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* file : {"alias_bomb.yaml", "csv_devices_overflow.csv", "utf16.yaml"}) {
    EXPECT_EQ(2, exit_status_of("cd " + dir.string() +
                                " && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                                "ASAN_OPTIONS=detect_leaks=0 mpiexec -n 2 --allow-run-as-root "
                                "--oversubscribe --bind-to none " +
                                binary.string() + " run " + (kMalformedDir / file).string() +
                                " -o " + (dir / "results.h5").string() + " >/dev/null 2>&1"))
        << file;
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << file << ": nothing is written";
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace scalebench
