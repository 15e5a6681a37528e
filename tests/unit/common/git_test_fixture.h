// Test helpers for the git / subprocess / prepare tests: a temporary directory and a
// fixture git repository with two branches and a tag, built with real git.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/base/subprocess.h"

namespace scalebench::testing {

/// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device random;
    path_ = std::filesystem::temp_directory_path() /
            ("scalebench-git-test-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// Runs git in `dir` with a test identity and no hooks/signing; fails the test on error.
inline std::string git_in(const std::filesystem::path& dir, std::vector<std::string> args) {
  SubprocessOptions options;
  options.argv = {"git",
                  "-c",
                  "user.name=t",
                  "-c",
                  "user.email=t@t",
                  "-c",
                  "commit.gpgsign=false",
                  "-c",
                  "tag.gpgsign=false",
                  "-c",
                  "core.hooksPath=/dev/null",
                  "-C",
                  dir.string()};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.unset_environment = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                               "GIT_COMMON_DIR"};
  options.separate_stderr = true;
  const SubprocessResult result = run_subprocess(options);
  EXPECT_TRUE(result.ok()) << quote_argv(options.argv) << ": " << result.describe() << "\n"
                           << result.error_output;
  std::string out = result.output;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

/// repo/ with branch `main` (a.txt, prepare.sh printing "main") and branch `feature`
/// (adds b.txt, prepare.sh printing "feature"), an annotated tag `v1` on main's commit,
/// and `main` checked out.
struct FixtureRepo {
  TempDir root;
  std::filesystem::path repo = root.path() / "repo";
  std::filesystem::path work = root.path() / "work";
  std::string main_commit;
  std::string feature_commit;

  FixtureRepo() {
    std::filesystem::create_directories(repo);
    git_in(repo, {"init", "-q", "-b", "main"});
    write_file(repo / "a.txt", "main\n");
    write_file(repo / "prepare.sh", "#!/bin/sh\necho \"prepare on main: $*\"\n");
    std::filesystem::permissions(repo / "prepare.sh", std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add);
    git_in(repo, {"add", "a.txt", "prepare.sh"});
    git_in(repo, {"commit", "-q", "-m", "main"});
    main_commit = git_in(repo, {"rev-parse", "HEAD"});
    git_in(repo, {"tag", "-a", "-m", "v1", "v1"});
    git_in(repo, {"checkout", "-q", "-b", "feature"});
    write_file(repo / "b.txt", "feature\n");
    write_file(repo / "prepare.sh", "#!/bin/sh\necho \"prepare on feature: $*\"\n");
    git_in(repo, {"add", "b.txt", "prepare.sh"});
    git_in(repo, {"commit", "-q", "-m", "feature"});
    feature_commit = git_in(repo, {"rev-parse", "HEAD"});
    git_in(repo, {"checkout", "-q", "main"});
  }
};

/// True once `pid` is gone or a zombie, polling up to `limit_s`.
inline bool process_gone(pid_t pid, double limit_s = 3.0) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    const auto paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() &&
        (line[paren + 2] == 'Z' || line[paren + 2] == 'X'))
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace scalebench::testing
