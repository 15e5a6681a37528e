#include "results/lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/base/error.h"
#include "common/base/escaped_text.h"
#include "common/base/logging.h"
#include "results/provenance.h"

namespace scalebench {
namespace {

/// What a holder writes into the lock file, and what a refused writer shows of it.
std::string holder_text() {
  return "host " + hostname() + ", pid " + std::to_string(::getpid()) + ", started " +
         iso8601_utc_now();
}

/// The holder line of the lock file open as `fd` (at most one short line).
std::string read_holder(int fd) {
  char buffer[512];
  const ssize_t got = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
  if (got <= 0) return "holder unknown: it has not written its host and pid yet";
  std::string text(buffer, static_cast<size_t>(got));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return escaped(text);
}

void write_holder(int fd, const std::filesystem::path& path) {
  const std::string text = holder_text() + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) < 0) {
    SB_LOG(warning) << "cannot write the holder into " << escaped(path) << ": "
                    << std::strerror(errno) << " (the lock is held all the same)";
  }
}

bool unsupported(int error) { return error == ENOLCK || error == ENOSYS || error == EOPNOTSUPP; }

/// True when `fd` is still the file at `path` (not unlinked or replaced by its holder).
bool is_current(int fd, const std::filesystem::path& path) {
  struct stat opened {};
  struct stat named {};
  if (::fstat(fd, &opened) != 0 || ::lstat(path.c_str(), &named) != 0) return false;
  return opened.st_dev == named.st_dev && opened.st_ino == named.st_ino;
}

}  // namespace

std::filesystem::path ResultsLock::lock_path_for(const std::filesystem::path& results_path) {
  std::filesystem::path lock = results_path;
  lock += ".lock";
  return lock;
}

ResultsLock ResultsLock::acquire(const std::filesystem::path& results_path) {
  const auto path = lock_path_for(results_path);
  if (!path.parent_path().empty()) {
    std::error_code error;
    std::filesystem::create_directories(path.parent_path(), error);
  }
  for (;;) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int error = errno;
      throw InputError("cannot open the lock file " + escaped(path) + " of results file " +
                       escaped(results_path) + ": " + std::strerror(error) +
                       (error == ELOOP ? " (it is a symbolic link; remove it)" : "") +
                       "; pass an -o path in a directory you can write");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      if (error == EWOULDBLOCK) {
        const std::string holder = read_holder(fd);
        ::close(fd);
        throw InputError("results file " + escaped(results_path) +
                         " is being written by another scalebench run (" + holder + "; lock file " +
                         escaped(path) +
                         "). Wait for that job to end, or write to another -o path; "
                         "--force does not override a live job");
      }
      ::close(fd);
      if (unsupported(error)) {
        SB_LOG(warning) << "the filesystem of " << escaped(path) << " does not support flock ("
                        << std::strerror(error)
                        << "): running without the one-writer lock; make sure no other job "
                           "writes "
                        << escaped(results_path)
                        << ", or use a local or lock-capable path (docs/user-guide.md)";
        return ResultsLock(-1, {});
      }
      throw InputError("cannot lock " + escaped(path) + ": " + std::strerror(error));
    }
    if (is_current(fd, path)) {
      write_holder(fd, path);
      return ResultsLock(fd, path);
    }
    ::close(fd);  // locked a file its last holder had just removed: try the new one
  }
}

ResultsLock::ResultsLock(ResultsLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

ResultsLock& ResultsLock::operator=(ResultsLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

ResultsLock::~ResultsLock() { release(); }

void ResultsLock::release() noexcept {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while locked; see Note [One writer per results file]
  ::close(fd_);
  fd_ = -1;
}

}  // namespace scalebench
