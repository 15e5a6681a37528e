// One writer per results file: the exclusive lock a `scalebench run` holds on
// `<output>.lock` for the whole job. See Note [One writer per results file].
#pragma once

#include <filesystem>
#include <string>
#include <utility>

namespace scalebench {

// Note [One writer per results file]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Two runs writing one results file at once (a second `run --resume` or `run --force` on
// the file of a live job) would run the same cells on shared hardware, contaminating each
// other's timings, and the last rename would win; `--force` would even replace the file
// the first job still writes. So rank 0 takes an exclusive flock(2) on the sibling
// `<output>.lock` before the results file is created or opened, and holds it until the job
// ends. The kernel releases a flock when its holder dies (SIGKILL, node reboot), so a
// crashed job never leaves a stale lock behind; the host, pid and start time written into
// the file only serve the refusal message of the next writer.
//
// The lock file is removed on release, while still locked. A process that opened the old
// file just before may then lock an unlinked inode, so `acquire` retries until the file
// it locked is the one at the path.
//
// flock works on local filesystems and on NFS (Linux emulates it with NFS byte-range
// locks), but Lustre mounted without `-o flock` (or with `localflock`) and some NFS setups
// without a lock daemon refuse or fake it. Where the filesystem refuses (ENOLCK, ENOSYS,
// EOPNOTSUPP) the run goes on unlocked with a warning; docs/user-guide.md recommends a
// local or lock-capable path for the results file. Alternative rejected: a pid file created
// with O_EXCL, which stays behind after a crash and then needs a liveness guess (a pid
// alone does not say on which host it runs).

/// The lock of one results file, held while the object lives (movable, not copyable).
class ResultsLock {
 public:
  /// Takes the lock on `lock_path_for(results_path)`, creating the file (and missing
  /// parent directories). Throws InputError naming the holder (host, pid, start time)
  /// when another process holds it, and InputError when the lock file is a symbolic link
  /// or cannot be created. On a filesystem without flock support it logs a warning and
  /// returns an object that holds nothing (see held()).
  static ResultsLock acquire(const std::filesystem::path& results_path);

  /// `<results_path>.lock`.
  static std::filesystem::path lock_path_for(const std::filesystem::path& results_path);

  ResultsLock(ResultsLock&& other) noexcept;
  ResultsLock& operator=(ResultsLock&& other) noexcept;
  ResultsLock(const ResultsLock&) = delete;
  ResultsLock& operator=(const ResultsLock&) = delete;
  /// Removes the lock file and releases the lock.
  ~ResultsLock();

  /// False only where the filesystem does not support flock (the run goes on unlocked).
  [[nodiscard]] bool held() const { return fd_ >= 0; }

 private:
  ResultsLock(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  void release() noexcept;

  int fd_ = -1;
  std::filesystem::path path_;
};

}  // namespace scalebench
