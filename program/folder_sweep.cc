#include "program/folder_sweep.h"

#include <signal.h>

#include <cerrno>
#include <charconv>
#include <system_error>

namespace scalebench::program {

// Note [Program folder sweep]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A program cell's folder, <temp>/scalebench-program-<cell id>-<worker pid>, is removed by the
// worker after the cell, or by the program's supervisor when the worker died first (Note
// [Program supervisor] in common/base/supervisor.cc). If both died (SIGKILL of the whole
// process tree, a node's power), the next program cell on the node removes it: every folder
// whose worker pid is no live process. The pid is the owner's: a live pid, even a reused one,
// keeps its folder (it is never another live worker's to lose). The temporary directory is
// assumed node-local, as /tmp is: a TMPDIR shared by nodes would show other nodes' workers as
// dead. Cost: one listing of the temporary directory per program cell.

std::optional<pid_t> cell_folder_owner(std::string_view name) {
  if (name.substr(0, kCellFolderPrefix.size()) != kCellFolderPrefix) return std::nullopt;
  const auto dash = name.rfind('-');
  if (dash == std::string_view::npos || dash < kCellFolderPrefix.size() + 1) return std::nullopt;
  const std::string_view digits = name.substr(dash + 1);
  long pid = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (error != std::errc() || end != digits.data() + digits.size() || pid <= 1 ||
      digits.front() == '0')
    return std::nullopt;
  return static_cast<pid_t>(pid);
}

std::vector<std::string> sweep_stale_cell_folders(const std::filesystem::path& temp) {
  std::vector<std::string> removed;
  std::error_code error;
  std::filesystem::directory_iterator entries(temp, error);
  if (error) return removed;
  for (const auto& entry : entries) {
    const std::string name = entry.path().filename().string();
    const auto owner = cell_folder_owner(name);
    std::error_code kind_error;
    if (!owner || !entry.is_directory(kind_error) || entry.is_symlink(kind_error)) continue;
    if (::kill(*owner, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to signal)
    std::error_code ignored;
    if (std::filesystem::remove_all(entry.path(), ignored) > 0 && !ignored) removed.push_back(name);
  }
  return removed;
}

}  // namespace scalebench::program
