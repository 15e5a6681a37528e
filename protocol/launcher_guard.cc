#include "protocol/launcher_guard.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>

namespace scalebench {
namespace {

#if defined(SYS_pidfd_open) && defined(SYS_pidfd_send_signal)
constexpr bool kHavePidfd = true;
#else
constexpr bool kHavePidfd = false;
#endif

/// /proc/<pid>/comm without the newline, through system calls only ("" when unreadable).
void read_comm(pid_t pid, char* out, size_t size) {
  out[0] = '\0';
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/comm", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  const ssize_t n = ::read(fd, out, size - 1);
  ::close(fd);
  out[std::max<ssize_t>(n, 0)] = '\0';
  if (char* newline = std::strchr(out, '\n')) *newline = '\0';
}

/// Closes every descriptor but `keep` (the guard must hold none of the rank's: see the Note).
void close_all_but(int keep) {
  for (int fd = 0; fd < 65536; ++fd) {
    if (fd != keep) ::close(fd);
  }
}

/// Milliseconds of CLOCK_MONOTONIC.
long long monotonic_ms() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<long long>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

/// fork() without the atfork handlers (Open MPI registers some; the child must run none of
/// the parent's code) where glibc has _Fork (2.34+).
pid_t fork_bare() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  return ::_Fork();
#else
  return ::fork();
#endif
}

/// The guard's life after the fork: system calls only. Never returns.
[[noreturn]] void guard(int launcher_fd, const char* launcher_stderr, const char* line,
                        size_t line_size, double grace_s) {
  ::setsid();
  std::signal(SIGPIPE, SIG_IGN);
  close_all_but(launcher_fd);
  const long long until = monotonic_ms() + static_cast<long long>(grace_s * 1000);
  pollfd ended{launcher_fd, POLLIN, 0};
  for (;;) {
    const long long left = until - monotonic_ms();
    if (left <= 0) break;
    const int ready = ::poll(&ended, 1, static_cast<int>(std::min(left, 60000LL)));
    if (ready > 0) ::_exit(0);  // the launcher ended by itself
  }
  const int err = ::open(launcher_stderr, O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
  if (err >= 0) {
    (void)!::write(err, line, line_size);
    ::close(err);
  }
#if defined(SYS_pidfd_send_signal)
  ::syscall(SYS_pidfd_send_signal, launcher_fd, SIGKILL, nullptr, 0);
#endif
  ::_exit(0);
}

}  // namespace

bool is_open_mpi_launcher(const char* comm) noexcept {
  for (const char* name : {"mpirun", "mpiexec", "orterun", "prterun"}) {
    if (std::strcmp(comm, name) == 0) return true;
  }
  return false;
}

void guard_launcher_end(const char* reason, double grace_s) noexcept {
  if (!kHavePidfd) return;
  const pid_t launcher = ::getppid();
  char comm[32];
  read_comm(launcher, comm, sizeof comm);
  if (!is_open_mpi_launcher(comm)) return;
#if defined(SYS_pidfd_open)
  const int launcher_fd = static_cast<int>(::syscall(SYS_pidfd_open, launcher, 0));
#else
  const int launcher_fd = -1;
#endif
  if (launcher_fd < 0) return;
  if (::getppid() != launcher) {  // it ended meanwhile; the pidfd may name another process
    ::close(launcher_fd);
    return;
  }
  char line[1024];
  const int written = std::snprintf(
      line, sizeof line,
      "scalebench: %s (pid %d) did not end within %g s of the job's end (%s): a node's "
      "daemon does not answer (a node cut off?), so it is ended now (SIGKILL; exit status "
      "137). Every finished cell is saved; see docs/reliability.md#a-node-cut-off\n",
      comm, static_cast<int>(launcher), grace_s, reason);
  const size_t size = std::min(static_cast<size_t>(std::max(written, 0)), sizeof line - 1);
  char launcher_stderr[64];
  std::snprintf(launcher_stderr, sizeof launcher_stderr, "/proc/%d/fd/2",
                static_cast<int>(launcher));
  const pid_t child = fork_bare();
  if (child == 0) guard(launcher_fd, launcher_stderr, line, size, grace_s);
  ::close(launcher_fd);
}

}  // namespace scalebench
