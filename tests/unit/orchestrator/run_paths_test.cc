// check_run_paths: what `scalebench run` refuses before it reads or writes anything.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/base/error.h"
#include "orchestrator/run_preparation.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;

class RunPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::path(::testing::TempDir()) / "sb-paths-XXXXXX").string();
    ASSERT_NE(nullptr, ::mkdtemp(pattern.data()));
    dir_ = pattern;
    std::ofstream(dir_ / "m.yaml") << "name: m\n";
    options_.matrix_path = dir_ / "m.yaml";
    options_.output_path = dir_ / "r.h5";
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// The InputError message of check_run_paths, or "" when it accepts.
  std::string refusal() const {
    try {
      check_run_paths(options_, 3);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  RunOptions options_;
};

TEST_F(RunPaths, AcceptsAFreshOutputAndWritesNothing) {
  EXPECT_EQ("", refusal());
  EXPECT_EQ(1, std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
}

TEST_F(RunPaths, OutputThatIsADirectoryIsRefusedEvenWithForce) {
  fs::create_directories(dir_ / "out");
  options_.output_path = dir_ / "out";
  options_.force = true;
  EXPECT_NE(refusal().find("is a directory"), std::string::npos) << refusal();
}

TEST_F(RunPaths, OutputThatIsTheMatrixIsRefusedEvenWithForce) {
  options_.force = true;
  options_.output_path = options_.matrix_path;
  EXPECT_NE(refusal().find("is the matrix file"), std::string::npos) << refusal();
  fs::create_symlink(dir_ / "m.yaml", dir_ / "link.h5");
  options_.output_path = dir_ / "link.h5";
  EXPECT_NE(refusal().find("is the matrix file"), std::string::npos) << refusal();
  options_.output_path = dir_ / "." / "m.yaml";
  EXPECT_NE(refusal().find("is the matrix file"), std::string::npos) << refusal();
}

TEST_F(RunPaths, LogDirThatIsAFileIsRefused) {
  std::ofstream(dir_ / "notadir") << "x";
  options_.log_dir = dir_ / "notadir";
  EXPECT_NE(refusal().find("--log-dir"), std::string::npos) << refusal();
}

TEST_F(RunPaths, NamesWithControlCharactersAreShownEscaped) {
  fs::create_directories(dir_ / "o\nut");
  options_.output_path = dir_ / "o\nut";
  const std::string message = refusal();
  EXPECT_EQ(std::string::npos, message.find('\n')) << message;
  EXPECT_NE(message.find("o\\nut"), std::string::npos) << message;
}

}  // namespace
}  // namespace scalebench
