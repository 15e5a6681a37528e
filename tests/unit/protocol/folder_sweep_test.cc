// Note [Program folder sweep]: cell folders of dead workers are removed, others kept.
#include "program/folder_sweep.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace scalebench::program {
namespace {

TEST(ProgramFolderSweep, ReadsTheOwnerFromTheName) {
  EXPECT_EQ(cell_folder_owner("scalebench-program-0123abcd-4567"), 4567);
  EXPECT_EQ(cell_folder_owner("scalebench-program-a-b-c-99"), 99);
  EXPECT_EQ(cell_folder_owner("scalebench-program-0123abcd-"), std::nullopt);
  EXPECT_EQ(cell_folder_owner("scalebench-program-0123abcd-12x"), std::nullopt);
  EXPECT_EQ(cell_folder_owner("scalebench-program-0123abcd-0012"), std::nullopt);
  EXPECT_EQ(cell_folder_owner("scalebench-program-0123abcd-1"), std::nullopt);  // init
  EXPECT_EQ(cell_folder_owner("scalebench-program--123"), std::nullopt);
  EXPECT_EQ(cell_folder_owner("scalebench-programs-x-123"), std::nullopt);
  EXPECT_EQ(cell_folder_owner("other-x-123"), std::nullopt);
  EXPECT_EQ(cell_folder_owner("scalebench-program-x-99999999999999999999"), std::nullopt);
}

/// A pid that was a process a moment ago and is none now.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

TEST(ProgramFolderSweep, RemovesOnlyFoldersOfDeadWorkers) {
  const auto temp =
      std::filesystem::temp_directory_path() / ("folder_sweep_test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(temp);
  const std::string dead = "scalebench-program-0123abcd-" + std::to_string(dead_pid());
  const std::string live = "scalebench-program-0123abcd-" + std::to_string(::getpid());
  std::filesystem::create_directories(temp / dead / "rank0");
  std::ofstream(temp / dead / "rank0" / "validation_outputs.f32") << "1234";
  std::filesystem::create_directories(temp / live / "rank0");
  std::ofstream(temp / ("scalebench-program-file-" + std::to_string(dead_pid()))) << "a file";
  std::filesystem::create_directories(temp / "unrelated-123");

  EXPECT_EQ(sweep_stale_cell_folders(temp), std::vector<std::string>{dead});
  EXPECT_FALSE(std::filesystem::exists(temp / dead));
  EXPECT_TRUE(std::filesystem::exists(temp / live / "rank0"));
  EXPECT_TRUE(std::filesystem::exists(temp / "unrelated-123"));
  EXPECT_EQ(sweep_stale_cell_folders(temp / "missing"), std::vector<std::string>{});
  std::filesystem::remove_all(temp);
}

}  // namespace
}  // namespace scalebench::program
