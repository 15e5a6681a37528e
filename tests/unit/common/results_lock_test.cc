// Note [One writer per results file]: one holder at a time, the holder named in the
// refusal, the lock gone with its holder (even a SIGKILLed one), no link followed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "common/base/error.h"
#include "results/lock.h"
#include "results_store_test_util.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;
using testing_util::TempDir;

/// The message of the InputError that acquire() throws for `results`, or "" if none.
std::string refusal(const fs::path& results) {
  try {
    const auto lock = ResultsLock::acquire(results);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ResultsLock, SecondWriterIsRefusedWithTheHolder) {
  const TempDir dir;
  const auto results = dir.path() / "r.h5";
  const auto lock = ResultsLock::acquire(results);
  ASSERT_TRUE(lock.held());
  EXPECT_TRUE(fs::exists(dir.path() / "r.h5.lock"));
  const std::string message = refusal(results);
  EXPECT_NE(message.find("being written by another scalebench run"), std::string::npos) << message;
  EXPECT_NE(message.find("host " + hostname()), std::string::npos) << message;
  EXPECT_NE(message.find("pid " + std::to_string(::getpid())), std::string::npos) << message;
  EXPECT_NE(message.find("started 20"), std::string::npos) << message;
}

TEST(ResultsLock, ReleasedAndRemovedWithItsHolder) {
  const TempDir dir;
  const auto results = dir.path() / "r.h5";
  { const auto lock = ResultsLock::acquire(results); }
  EXPECT_FALSE(fs::exists(ResultsLock::lock_path_for(results)));
  auto again = ResultsLock::acquire(results);
  EXPECT_TRUE(again.held());
  ResultsLock moved = std::move(again);
  EXPECT_EQ("", refusal(dir.path() / "other.h5"));
  EXPECT_NE("", refusal(results));
}

TEST(ResultsLock, ReleasedWhenItsHolderIsKilled) {
  const TempDir dir;
  const auto results = dir.path() / "r.h5";
  int ready[2];
  ASSERT_EQ(0, ::pipe(ready));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      const auto lock = ResultsLock::acquire(results);
      const char byte = 1;
      (void)::write(ready[1], &byte, 1);
      for (;;) ::pause();
    } catch (...) {
      _exit(1);
    }
  }
  char byte = 0;
  ASSERT_EQ(1, ::read(ready[0], &byte, 1));
  const std::string message = refusal(results);
  EXPECT_NE(message.find("pid " + std::to_string(child)), std::string::npos) << message;
  ASSERT_EQ(0, ::kill(child, SIGKILL));
  int status = 0;
  ASSERT_EQ(child, ::waitpid(child, &status, 0));
  EXPECT_TRUE(fs::exists(ResultsLock::lock_path_for(results)));  // stale file, no lock
  EXPECT_EQ("", refusal(results));
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(ResultsLock, LockFileThatIsALinkIsRefused) {
  const TempDir dir;
  const auto results = dir.path() / "r.h5";
  const auto target = dir.path() / "target";
  std::ofstream(target) << "keep\n";
  fs::create_symlink(target, ResultsLock::lock_path_for(results));
  const std::string message = refusal(results);
  EXPECT_NE(message.find("symbolic link"), std::string::npos) << message;
  std::ifstream in(target);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ("keep", text);
}

TEST(ResultsLock, HolderWithAControlCharacterInItsLineIsShownEscaped) {
  const TempDir dir;
  const auto results = dir.path() / "r\nx.h5";
  const auto lock = ResultsLock::acquire(results);
  const std::string message = refusal(results);
  EXPECT_EQ(std::string::npos, message.find('\n')) << message;
  EXPECT_NE(message.find("r\\nx.h5"), std::string::npos) << message;
}

}  // namespace
}  // namespace scalebench
