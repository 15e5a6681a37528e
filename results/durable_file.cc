#include "results/durable_file.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/base/error.h"
#include "common/base/process_memory.h"

namespace scalebench::durable {
namespace {

[[noreturn]] void throw_os_error(const char* file, int line, const std::string& call,
                                 const std::filesystem::path& path, int error) {
  throw LibraryError("OS", format_library_error("OS", file, line, call + " '" + path.string() + "'",
                                                std::strerror(error)));
}
#define SCALEBENCH_OS_FAIL(call, path) throw_os_error(__FILE__, __LINE__, call, path, errno)

/// Owns a POSIX file descriptor.
class Fd {
 public:
  Fd(const std::filesystem::path& path, int flags, mode_t mode = 0644)
      : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {
    if (fd_ < 0) SCALEBENCH_OS_FAIL("open", path);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

void fsync_path(const std::filesystem::path& path, int flags) {
  const Fd fd(path, flags);
  if (::fsync(fd.get()) != 0) SCALEBENCH_OS_FAIL("fsync", path);
}

std::filesystem::path directory_of(const std::filesystem::path& target) {
  const auto parent = target.parent_path();
  return parent.empty() ? std::filesystem::path(".") : parent;
}

void copy_with_read_write(int in, int out, const std::filesystem::path& from) {
  std::vector<char> buffer(1 << 20);
  for (;;) {
    const ssize_t got = ::read(in, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) SCALEBENCH_OS_FAIL("read", from);
    if (got == 0) return;
    for (ssize_t done = 0; done < got;) {
      const ssize_t put = ::write(out, buffer.data() + done, static_cast<size_t>(got - done));
      if (put < 0 && errno == EINTR) continue;
      if (put < 0) SCALEBENCH_OS_FAIL("write", from);
      done += put;
    }
  }
}

/// copy_file_range until EOF; false when the kernel/filesystem does not support it
/// before any byte was copied (then the caller falls back to read/write).
bool copy_with_copy_file_range(int in, int out, const std::filesystem::path& from) {
  bool copied_any = false;
  for (;;) {
    const ssize_t got = ::copy_file_range(in, nullptr, out, nullptr, size_t{1} << 30, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && !copied_any &&
        (errno == ENOSYS || errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP)) {
      return false;
    }
    if (got < 0) SCALEBENCH_OS_FAIL("copy_file_range", from);
    if (got == 0) return true;
    copied_any = true;
  }
}

/// Gives the open file `fd` the permission bits and group of `like` (see create_temp_like).
void copy_permissions(int fd, const struct stat& like, const std::filesystem::path& path) {
  mode_t mode = like.st_mode & 0777;
  struct stat current {};
  if (::fstat(fd, &current) != 0) SCALEBENCH_OS_FAIL("fstat", path);
  if (current.st_gid != like.st_gid && ::fchown(fd, static_cast<uid_t>(-1), like.st_gid) != 0) {
    mode &= ~static_cast<mode_t>(S_IRWXG);  // another group than the original's: no access
  }
  if (::fchmod(fd, mode) != 0) SCALEBENCH_OS_FAIL("fchmod", path);
}

}  // namespace

void create_temp_like(const std::filesystem::path& target, const std::filesystem::path& temp) {
  struct stat existing {};
  const bool exists = ::stat(target.c_str(), &existing) == 0;
  if (!exists && errno != ENOENT) SCALEBENCH_OS_FAIL("stat", target);
  if (::unlink(temp.c_str()) != 0 && errno != ENOENT) SCALEBENCH_OS_FAIL("unlink", temp);
  // O_EXCL: the file is ours, new, and at most owner-readable until its mode is set.
  const Fd fd(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, exists ? 0600 : 0666);
  if (exists) copy_permissions(fd.get(), existing, temp);
}

std::filesystem::path temp_sibling(const std::filesystem::path& target) {
  auto name = target.filename().string() + ".tmp-" + std::to_string(::getpid());
  return target.parent_path() / name;
}

void copy_contents(const std::filesystem::path& from, const std::filesystem::path& to) {
  const Fd in(from, O_RDONLY);
  const Fd out(to, O_WRONLY | O_CREAT | O_TRUNC);
  if (::ioctl(out.get(), FICLONE, in.get()) == 0) return;
  if (!copy_with_copy_file_range(in.get(), out.get(), from)) {
    copy_with_read_write(in.get(), out.get(), from);
  }
}

void commit_replace(const std::filesystem::path& file, const std::filesystem::path& target) {
  fsync_path(file, O_RDONLY);
  if (::rename(file.c_str(), target.c_str()) != 0) SCALEBENCH_OS_FAIL("rename", file);
  fsync_path(directory_of(target), O_RDONLY | O_DIRECTORY);
}

namespace {

/// Whether `pid` is a process that may still write: it exists and is not a zombie. A
/// SIGKILLed run's rank 0 whose parent went with it is a zombie until init reaps it, which
/// in a container can take long: kill(pid, 0) succeeds for it, and its temporary was kept
/// (a stale `.tmp-<pid>` after the final --resume of orchestrator_faults_sigkill_resume).
bool writer_may_be_alive(pid_t pid) {
  if (pid == ::getpid()) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  const auto stat = read_proc_stat(pid);
  return !stat || stat->live();  // unreadable: trust kill()
}

}  // namespace

int remove_stale_temps(const std::filesystem::path& target) {
  const std::string prefix = target.filename().string() + ".tmp-";
  std::error_code error;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(directory_of(target), error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid_text = name.substr(prefix.size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const auto pid = static_cast<pid_t>(std::strtol(pid_text.c_str(), nullptr, 10));
    if (writer_may_be_alive(pid)) continue;
    if (std::filesystem::remove(entry.path(), error)) ++removed;
  }
  return removed;
}

}  // namespace scalebench::durable
