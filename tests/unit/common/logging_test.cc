// Log files are never written through a symbolic link, and a --log-dir that cannot hold
// the logs is refused before anything is written.
#include "common/base/logging.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/base/error.h"
#include "results_store_test_util.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;
using testing_util::TempDir;

std::string read_all(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Console only again after each test (the file sinks keep files open).
class Logging : public testing::Test {
 protected:
  void TearDown() override { init_logging(LogOptions{}); }
};

LogOptions file_log(const fs::path& dir, int rank) {
  LogOptions options;
  options.console = false;
  options.rank = rank;
  options.log_dir = dir;
  return options;
}

TEST_F(Logging, WritesTheRankLog) {
  const TempDir dir;
  init_logging(file_log(dir.path() / "logs", 3));
  SB_LOG(info) << "hello file";
  EXPECT_NE(read_all(dir.path() / "logs" / "rank-3.log").find("[r3] info: hello file"),
            std::string::npos);
}

TEST_F(Logging, RankLogThatIsASymlinkIsRefusedAndItsTargetUntouched) {
  const TempDir dir;
  const auto logs = dir.path() / "logs";
  fs::create_directories(logs);
  const auto target = dir.path() / "victim";
  std::ofstream(target) << "secret\n";
  fs::create_symlink(target, logs / "rank-1.log");
  try {
    init_logging(file_log(logs, 1));
    SB_LOG(info) << "must not reach the target";
    ADD_FAILURE() << "init_logging followed the link";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_EQ("secret\n", read_all(target));
  try {
    check_log_dir(logs, 2);
    ADD_FAILURE() << "check_log_dir accepted the link";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("rank-1.log is a symbolic link"), std::string::npos)
        << e.what();
  }
}

TEST_F(Logging, LogDirThatIsAFileIsRefused) {
  const TempDir dir;
  const auto file = dir.path() / "notadir";
  std::ofstream(file) << "x";
  EXPECT_THROW(init_logging(file_log(file, 0)), InputError);
  try {
    check_log_dir(file, 2);
    ADD_FAILURE() << "check_log_dir accepted a regular file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("exists and is not a directory"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_log_dir(file / "sub", 2), InputError);
  EXPECT_EQ("x", read_all(file));
}

TEST_F(Logging, CheckLogDirWritesNothing) {
  const TempDir dir;
  check_log_dir(dir.path() / "a" / "b", 4);
  EXPECT_FALSE(fs::exists(dir.path() / "a"));
  fs::create_directories(dir.path() / "logs");
  std::ofstream(dir.path() / "logs" / "rank-0.log") << "earlier run\n";
  check_log_dir(dir.path() / "logs", 4);  // an existing regular log is appended to later
}

}  // namespace
}  // namespace scalebench
