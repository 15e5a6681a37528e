// Cell folders of program cells left by dead workers (Note [Program folder sweep]).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scalebench::program {

/// The prefix of a program cell's folder in the temporary directory:
/// <temp>/scalebench-program-<cell id>-<worker pid>.
inline constexpr std::string_view kCellFolderPrefix = "scalebench-program-";

/// The worker pid of a cell folder's name; nullopt for a name that is not one.
std::optional<pid_t> cell_folder_owner(std::string_view name);

/// Removes the cell folders in `temp` whose worker is no live process (kill(pid, 0) says
/// ESRCH); returns their names. Folders of live pids, and anything else, are left alone.
/// Errors (a folder that cannot be read or removed) are skipped: the sweep never throws.
std::vector<std::string> sweep_stale_cell_folders(const std::filesystem::path& temp);

}  // namespace scalebench::program
