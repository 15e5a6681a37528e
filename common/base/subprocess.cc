#include "common/base/subprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <system_error>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not in a header

namespace scalebench {
namespace {

// Note [Subprocess lifecycle]
// 1. posix_spawnp (glibc: clone(CLONE_VM|CLONE_VFORK) + execvp) starts the child in its
//    own process group (POSIX_SPAWN_SETPGROUP, pgid = pid), with every signal at its
//    default disposition and an empty signal mask (the caller may ignore SIGPIPE or block
//    SIGTERM; the child must not inherit that), stdin = /dev/null, stdout/stderr = pipes,
//    and every other descriptor closed. posix_spawn is used rather than a bare fork()
//    because the caller is a multi-threaded MPI process: nothing runs between the clone and
//    the exec except the spawn actions, and exec failures (ENOENT, EACCES, a missing
//    working directory) come back as a return code.
// 2. The parent polls the pipes and a pidfd of the child (which becomes readable when it
//    exits; without pidfd support, 50 ms slices). The child's exit is observed with
//    waitid(WNOWAIT): the child stays a zombie, so its pid, which is also the group id,
//    cannot be reused by another process while we may still signal the group.
// 3. Timeout: SIGTERM to the group, SIGKILL to the group `kill_grace_s` later.
// 4. After the child has exited, live members of its group (found in /proc, once the pipes
//    are closed or 100 ms after the exit) get the same SIGTERM-then-SIGKILL treatment; output is
//    read until every writer has closed the pipes, or for at most 1 s after the SIGKILL (a process
//    that escaped the group with setsid may hold the pipe open forever).
// 5. Only then is the child reaped (waitpid) and its status decoded.

constexpr int kPollSliceMs = 50;
constexpr double kDrainAfterKillS = 1.0;
constexpr double kScanDelayS = 0.1;  // after the child's exit, before looking for leftovers

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

/// Owns a file descriptor until released.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { close_fd(fd_); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  [[nodiscard]] int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  int* out() { return &fd_; }

 private:
  int fd_ = -1;
};

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

[[noreturn]] void throw_errno(const std::string& what, int error_number) {
  throw SubprocessError(what + ": " + std::strerror(error_number), error_number);
}

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
                     const std::filesystem::path& working_dir) {
  auto& actions = setup.actions;
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, output_write_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, error_write_fd, STDERR_FILENO);
  if (!working_dir.empty()) posix_spawn_file_actions_addchdir_np(&actions, working_dir.c_str());
  if (pass_fd >= 0) {
    // dup2 clears FD_CLOEXEC on the copy; when pass_fd already is kPassedFd it only stays.
    posix_spawn_file_actions_adddup2(&actions, pass_fd, kPassedFd);
    posix_spawn_file_actions_addclosefrom_np(&actions, kPassedFd + 1);
  } else {
    posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  }

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

int open_log(const std::filesystem::path& path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno("cannot open log file '" + path.string() + "'", errno);
  return fd;
}

void write_all(int fd, const char* data, std::size_t size, const std::string& what) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("cannot write " + what, errno);
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

/// The child has exited (it is left a zombie: see Note [Subprocess lifecycle]).
bool has_exited(pid_t pid) {
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0)
    return errno == ECHILD;  // SIGCHLD ignored by the caller: the kernel reaped it
  return info.si_pid != 0;
}

/// Process group and state of process `pid` from /proc/<pid>/stat; false if unreadable.
bool read_group_and_state(const char* pid, long& pgrp, char& state) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%s/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[512];
  const ssize_t n = ::read(fd, buffer, sizeof(buffer) - 1);
  ::close(fd);
  if (n <= 0) return false;
  buffer[n] = '\0';
  const char* paren = std::strrchr(buffer, ')');  // the command name may contain anything
  long ppid = 0;
  return paren != nullptr && std::sscanf(paren + 1, " %c %ld %ld", &state, &ppid, &pgrp) == 3;
}

/// Some process other than `leader` in process group `pgid` is alive (not a zombie).
/// Linux has no index by group, so this reads /proc/*/stat (about 50 us per process).
bool group_has_live_members(pid_t pgid, pid_t leader) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return false;
  bool found = false;
  while (const dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    if (std::strtol(entry->d_name, nullptr, 10) == leader) continue;
    long pgrp = 0;
    char state = 0;
    if (read_group_and_state(entry->d_name, pgrp, state) && pgrp == pgid && state != 'Z' &&
        state != 'X') {
      found = true;
      break;
    }
  }
  ::closedir(proc);
  return found;
}

std::string signal_name(int signal_number) {
  const char* abbrev = sigabbrev_np(signal_number);
  return abbrev != nullptr ? std::string("SIG") + abbrev
                           : "signal " + std::to_string(signal_number);
}

std::string format_seconds(double seconds) {
  std::ostringstream out;
  out << std::round(seconds * 1000.0) / 1000.0 << " s";
  return out.str();
}

}  // namespace

Subprocess::Subprocess(SubprocessOptions options) : options_(std::move(options)) {
  if (options_.argv.empty() || options_.argv.front().empty())
    throw InputError("subprocess: empty argument vector; give at least the program name");
  if (options_.timeout_s < 0.0 || options_.kill_grace_s < 0.0)
    throw InputError("subprocess " + quote_argv(options_.argv) +
                     ": timeout_s and kill_grace_s must be >= 0");
  UniqueFd log;
  if (!options_.log_path.empty()) *log.out() = open_log(options_.log_path);

  std::array<int, 2> output_pipe{-1, -1};
  std::array<int, 2> error_pipe{-1, -1};
  if (::pipe2(output_pipe.data(), O_CLOEXEC) != 0) throw_errno("pipe2", errno);
  UniqueFd output_read(output_pipe[0]);
  UniqueFd output_write(output_pipe[1]);
  UniqueFd error_read;
  UniqueFd error_write;
  if (options_.separate_stderr) {
    if (::pipe2(error_pipe.data(), O_CLOEXEC) != 0) throw_errno("pipe2", errno);
    *error_read.out() = error_pipe[0];
    *error_write.out() = error_pipe[1];
  }

  std::vector<std::string> argv_strings = options_.argv;
  std::vector<std::string> env_strings = child_environment(options_);
  std::vector<char*> argv = c_pointers(argv_strings);
  std::vector<char*> envp = c_pointers(env_strings);
  SpawnSetup setup;
  configure_spawn(setup, output_write.get(),
                  options_.separate_stderr ? error_write.get() : output_write.get(),
                  options_.pass_fd, options_.working_dir);

  started_at_s_ = now_s();
  const int rc = posix_spawnp(&pid_, argv.front(), &setup.actions, &setup.attributes, argv.data(),
                              envp.data());
  if (rc != 0) {
    pid_ = -1;
    std::string where;
    if (!options_.working_dir.empty()) where = " in '" + options_.working_dir.string() + "'";
    throw_errno("cannot start " + quote_argv(options_.argv) + where +
                    " (program looked up in PATH unless it contains a '/'; a missing working "
                    "directory gives the same error)",
                rc);
  }
  pid_fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));  // -1: poll in slices
  output_fd_ = output_read.release();
  error_fd_ = error_read.release();
  log_fd_ = log.release();
}

Subprocess::~Subprocess() {
  kill_and_reap();
  close_fd(output_fd_);
  close_fd(error_fd_);
  close_fd(log_fd_);
  close_fd(pid_fd_);
}

void Subprocess::kill_and_reap() noexcept {
  if (pid_ <= 0 || reaped_) return;
  ::kill(-pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
}

void Subprocess::signal_group(int signal_number) const {
  if (pid_ > 0 && !reaped_) ::kill(-pid_, signal_number);
}

void Subprocess::append_output(const char* data, std::size_t size, std::string& sink,
                               SubprocessResult& result) {
  if (log_fd_ >= 0) write_all(log_fd_, data, size, "log file '" + options_.log_path.string() + "'");
  sink.append(data, size);
  const std::size_t limit = options_.max_captured_bytes;
  if (sink.size() > 2 * limit + 65536) {  // amortised: trim rarely, keep the tail
    sink.erase(0, sink.size() - limit);
    result.output_truncated = true;
  }
}

void Subprocess::pump(int timeout_ms, SubprocessResult& result) {
  std::array<pollfd, 3> fds{};
  std::array<int*, 3> owners{};
  std::array<std::string*, 3> sinks{};
  nfds_t count = 0;
  if (pid_fd_ >= 0) {
    fds[count] = {pid_fd_, POLLIN, 0};
    owners[count] = &pid_fd_;
    sinks[count++] = nullptr;  // readable = exited; wait() notices it and drops the pidfd
  }
  if (output_fd_ >= 0) {
    fds[count] = {output_fd_, POLLIN, 0};
    owners[count] = &output_fd_;
    sinks[count++] = &result.output;
  }
  if (error_fd_ >= 0) {
    fds[count] = {error_fd_, POLLIN, 0};
    owners[count] = &error_fd_;
    sinks[count++] = &result.error_output;
  }
  const int ready = ::poll(count > 0 ? fds.data() : nullptr, count, timeout_ms);
  if (ready <= 0) return;  // timeout or EINTR: the caller loops
  std::array<char, 65536> buffer{};
  for (nfds_t i = 0; i < count; ++i) {
    if (fds[i].revents == 0 || sinks[i] == nullptr) continue;
    const ssize_t n = ::read(*owners[i], buffer.data(), buffer.size());
    if (n > 0) {
      append_output(buffer.data(), static_cast<std::size_t>(n), *sinks[i], result);
    } else if (n == 0 || errno != EINTR) {
      close_fd(*owners[i]);  // EOF: every writer has closed its end
    }
  }
}

SubprocessResult Subprocess::wait() {
  SubprocessResult result;
  const double grace_s = options_.kill_grace_s;
  double exited_at = -1.0;
  double term_at = -1.0;
  double kill_at = -1.0;
  while (true) {  // See Note [Subprocess lifecycle]
    const double now = now_s();
    if (exited_at < 0.0 && has_exited(pid_)) {
      exited_at = now;
      close_fd(pid_fd_);  // stays readable from now on: stop polling it
    }
    if (exited_at < 0.0 && options_.timeout_s > 0.0 && term_at < 0.0 &&
        now - started_at_s_ >= options_.timeout_s) {
      result.timed_out = true;
      signal_group(SIGTERM);
      term_at = now;
    }
    if (exited_at < 0.0 && term_at < 0.0 && options_.keep_going && !options_.keep_going()) {
      result.stopped = true;
      signal_group(SIGTERM);
      term_at = now;
    }
    if (exited_at >= 0.0) {
      const bool open = output_fd_ >= 0 || error_fd_ >= 0;
      const bool scan = !open || now - exited_at >= kScanDelayS;  // the scan costs ~10 ms
      const bool members = scan && group_has_live_members(pid_, pid_);
      if (scan && !members && !open) break;
      if (members && term_at < 0.0) {
        signal_group(SIGTERM);
        term_at = now;
      }
      if (scan && !members && term_at < 0.0 && now - exited_at >= grace_s) break;  // held outside
      if (kill_at >= 0.0 && now - kill_at >= kDrainAfterKillS) break;
    }
    if (term_at >= 0.0 && kill_at < 0.0 && now - term_at >= grace_s) {
      signal_group(SIGKILL);
      kill_at = now;
    }
    pump(kPollSliceMs, result);
  }
  close_fd(output_fd_);
  close_fd(error_fd_);

  int status = 0;
  pid_t waited = 0;
  while ((waited = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  result.wall_s = now_s() - started_at_s_;
  if (waited == pid_ && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (waited == pid_ && WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  for (std::string* sink : {&result.output, &result.error_output}) {
    if (sink->size() > options_.max_captured_bytes) {
      sink->erase(0, sink->size() - options_.max_captured_bytes);
      result.output_truncated = true;
    }
  }
  return result;
}

std::string SubprocessResult::describe(double timeout_s) const {
  std::string text;
  if (timed_out) {
    text = "timed out";
    if (timeout_s > 0.0) text += " after " + format_seconds(timeout_s);
    text += "; ";
  }
  if (term_signal != 0) {
    text +=
        "killed by signal " + std::to_string(term_signal) + " (" + signal_name(term_signal) + ")";
  } else {
    text += "exit status " + std::to_string(exit_code);
  }
  return text;
}

SubprocessResult run_subprocess(SubprocessOptions options) {
  Subprocess child(std::move(options));
  return child.wait();
}

namespace {

bool is_plain_word(const std::string& arg) {
  return !arg.empty() && std::all_of(arg.begin(), arg.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || (c != 0 && std::strchr("_@%+=:,./-", c) != nullptr);
  });
}

std::string ansi_c_quote(const std::string& arg) {
  std::ostringstream out;
  out << "$'";
  for (unsigned char c : arg) {
    if (c == '\n') {
      out << "\\n";
    } else if (c == '\t') {
      out << "\\t";
    } else if (c == '\'' || c == '\\') {
      out << '\\' << c;
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out << "\\x" << kHex[c >> 4] << kHex[c & 0xf];
    } else {
      out << c;
    }
  }
  out << "'";
  return out.str();
}

std::string quote_one(const std::string& arg) {
  if (is_plain_word(arg)) return arg;
  if (std::any_of(arg.begin(), arg.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
    return ansi_c_quote(arg);
  std::string quoted = "'";
  for (char c : arg) quoted += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

std::string quote_argv(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& arg : argv) {
    if (!line.empty()) line += ' ';
    line += quote_one(arg);
  }
  return line;
}

std::string tail_lines(const std::string& text, std::size_t max_lines, std::size_t max_bytes) {
  std::size_t search_end = text.size();
  if (search_end > 0 && text[search_end - 1] == '\n') --search_end;  // not a line of its own
  std::size_t begin = max_lines == 0 ? text.size() : 0;
  for (std::size_t lines = 0; lines < max_lines; ++lines) {
    const std::size_t nl = search_end == 0 ? std::string::npos : text.rfind('\n', search_end - 1);
    if (nl == std::string::npos) {
      begin = 0;
      break;
    }
    begin = nl + 1;
    search_end = nl;
  }
  if (text.size() - begin > max_bytes) {
    begin = text.size() - max_bytes;
    const std::size_t nl = text.find('\n', begin);
    if (nl != std::string::npos && nl + 1 < text.size()) begin = nl + 1;
  }
  return begin == 0 ? text : "...\n" + text.substr(begin);
}

}  // namespace scalebench
