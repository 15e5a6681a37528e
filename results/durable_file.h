// Crash-safe file replacement: the building blocks of Note [Results durability]
// (results/store.h). POSIX only. Failures throw LibraryError("OS", ...) with the
// call, the path and strerror.
#pragma once

#include <filesystem>

namespace scalebench::durable {

/// `<dir>/<name>.tmp-<pid>` for this process: the sibling that updates are built in.
/// Same directory, so rename() over the target is atomic.
std::filesystem::path temp_sibling(const std::filesystem::path& target);

/// Creates `temp` empty (removing a file left there) with the permissions the committed
/// file must have: those of `target` when it exists (its mode bits and group; where the
/// group cannot be kept, as for a group this user is not in, the group bits are cleared,
/// so a rewrite never widens access), else those of a new file (0666 minus the umask).
/// The permissions are set before any content is written. Owner, setuid/setgid/sticky
/// bits and ACLs are not carried over.
void create_temp_like(const std::filesystem::path& target, const std::filesystem::path& temp);

/// Copies the bytes of `from` into `to` (created or truncated): a reflink (FICLONE) where
/// the filesystem supports it, else copy_file_range, else read/write. An existing `to`
/// keeps its permissions (see create_temp_like).
void copy_contents(const std::filesystem::path& from, const std::filesystem::path& to);

/// fsync()s `file`, rename()s it over `target`, and fsyncs the directory, so that after
/// return the new content is the target's, durably; before the rename completes the old
/// content is. Either way the target is one complete file.
void commit_replace(const std::filesystem::path& file, const std::filesystem::path& target);

/// Removes `<name>.tmp-<pid>` siblings of `target` left by processes that no longer
/// exist on this host (a SIGKILLed run). Returns how many were removed.
int remove_stale_temps(const std::filesystem::path& target);

}  // namespace scalebench::durable
