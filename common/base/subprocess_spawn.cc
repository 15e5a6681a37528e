#include "common/base/subprocess_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not in a header

namespace scalebench::spawn_detail {

std::vector<std::string> child_environment(const SubprocessOptions& options) {
  auto is_replaced = [&](const std::string& entry) {
    const std::string name = entry.substr(0, entry.find('='));
    if (std::find(options.unset_environment.begin(), options.unset_environment.end(), name) !=
        options.unset_environment.end())
      return true;
    if (std::any_of(options.unset_environment_prefixes.begin(),
                    options.unset_environment_prefixes.end(),
                    [&](const std::string& prefix) { return name.rfind(prefix, 0) == 0; }))
      return true;
    return std::any_of(options.set_environment.begin(), options.set_environment.end(),
                       [&](const auto& kv) { return kv.first == name; });
  };
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (!is_replaced(*entry)) env.emplace_back(*entry);
  }
  const auto& set = options.set_environment;
  for (size_t i = 0; i < set.size(); ++i) {
    const bool replaced_later =
        std::any_of(set.begin() + static_cast<std::ptrdiff_t>(i) + 1, set.end(),
                    [&](const auto& kv) { return kv.first == set[i].first; });
    if (!replaced_later) env.push_back(set[i].first + "=" + set[i].second);
  }
  return env;
}

std::vector<char*> c_pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

void configure_spawn(SpawnSetup& setup, int output_write_fd, int error_write_fd, int pass_fd,
                     int status_write_fd, const std::filesystem::path& working_dir) {
  auto& actions = setup.actions;
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, output_write_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, error_write_fd, STDERR_FILENO);
  if (!working_dir.empty()) posix_spawn_file_actions_addchdir_np(&actions, working_dir.c_str());
  int last = STDERR_FILENO;
  if (pass_fd >= 0) {
    // dup2 clears FD_CLOEXEC on the copy; when pass_fd already is kPassedFd it only stays.
    posix_spawn_file_actions_adddup2(&actions, pass_fd, kPassedFd);
    last = kPassedFd;
  }
  if (status_write_fd >= 0) {  // >= kHighFd: the dup2 above cannot have overwritten it
    posix_spawn_file_actions_adddup2(&actions, status_write_fd, ++last);
  }
  posix_spawn_file_actions_addclosefrom_np(&actions, last + 1);

  sigset_t defaults;
  sigfillset(&defaults);
  sigdelset(&defaults, SIGKILL);
  sigdelset(&defaults, SIGSTOP);
  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  posix_spawnattr_setsigdefault(&setup.attributes, &defaults);
  posix_spawnattr_setsigmask(&setup.attributes, &empty_mask);
  posix_spawnattr_setpgroup(&setup.attributes, 0);
  posix_spawnattr_setflags(&setup.attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
}

}  // namespace scalebench::spawn_detail
