// How Subprocess (common/base/subprocess.cc) sets up posix_spawn: the child's environment,
// its descriptors and its signal state (Note [Subprocess lifecycle], step 1). Internal to
// subprocess.cc; apart so that each file holds one concern.
#pragma once

#include <spawn.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/base/subprocess.h"

namespace scalebench::spawn_detail {

/// Owns posix_spawn's attribute and file-action objects.
struct SpawnSetup {
  posix_spawn_file_actions_t actions{};
  posix_spawnattr_t attributes{};
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

/// The caller's environment without the names `options` unsets or sets, then its settings
/// (the last setting of a name wins).
std::vector<std::string> child_environment(const SubprocessOptions& options);

/// argv/envp for posix_spawn: pointers into `strings`, then a null pointer.
std::vector<char*> c_pointers(std::vector<std::string>& strings);

/// stdin from /dev/null, stdout/stderr to the pipes, `pass_fd` as kPassedFd and
/// `status_write_fd` after it when >= 0, every other descriptor closed; default signal
/// dispositions, an empty mask, a process group of its own.
void configure_spawn(SpawnSetup& setup, int output_write_fd, int error_write_fd, int pass_fd,
                     int status_write_fd, const std::filesystem::path& working_dir);

}  // namespace scalebench::spawn_detail
