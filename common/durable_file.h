// Crash-safe file replacement: the building blocks of Note [Results durability]
// (common/results_store.h). POSIX only. Failures throw LibraryError("OS", ...) with the
// call, the path and strerror.
#pragma once

#include <filesystem>

namespace scalebench::durable {

/// `<dir>/<name>.tmp-<pid>` for this process: the sibling that updates are built in.
/// Same directory, so rename() over the target is atomic.
std::filesystem::path temp_sibling(const std::filesystem::path& target);

/// Copies the bytes of `from` into `to` (created or truncated): a reflink (FICLONE) where
/// the filesystem supports it, else copy_file_range, else read/write.
void copy_contents(const std::filesystem::path& from, const std::filesystem::path& to);

/// fsync()s `file`, rename()s it over `target`, and fsyncs the directory, so that after
/// return the new content is the target's, durably; before the rename completes the old
/// content is. Either way the target is one complete file.
void commit_replace(const std::filesystem::path& file, const std::filesystem::path& target);

/// Removes `<name>.tmp-<pid>` siblings of `target` left by processes that no longer
/// exist on this host (a SIGKILLed run). Returns how many were removed.
int remove_stale_temps(const std::filesystem::path& target);

}  // namespace scalebench::durable
