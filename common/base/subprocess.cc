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

#include "common/base/build_info.h"
#include "common/base/process_memory.h"
#include "common/base/subprocess_spawn.h"
#include "common/base/supervisor.h"

namespace scalebench {
namespace {

using spawn_detail::c_pointers;
using spawn_detail::child_environment;
using spawn_detail::configure_spawn;
using spawn_detail::SpawnSetup;

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
// With a supervisor (SubprocessOptions::supervisor, Note [Program supervisor]) the child of
// step 1 is the supervisor, alone in its group, and the program is its child in a group of
// its own: the SIGTERM of step 3 reaches the supervisor, which ends the program's group and
// everything the program started (SIGTERM, SIGKILL after the same grace); the SIGKILL of
// step 3 then comes kSupervisorMarginS later, only for a supervisor that hangs. Its status
// lines (program pid, mechanism, leftovers, the program's exit) arrive on a pipe of their own.

constexpr int kPollSliceMs = 50;
constexpr double kDrainAfterKillS = 1.0;
constexpr double kScanDelayS = 0.1;  // after the child's exit, before looking for leftovers
/// With a supervisor: after its grace, how long it may take to end everything before we
/// SIGKILL it (it needs a /proc scan and a reap: milliseconds).
constexpr double kSupervisorMarginS = 5.0;
/// With a supervisor: how long its start may take (fork + exec of a small binary, then of
/// the program: milliseconds; a loaded machine takes longer).
constexpr int kSupervisorStartMs = 30000;
/// With a supervisor: its status pipe's write end is moved at or above this descriptor
/// before the spawn, so that the spawn's dup2 to kPassedFd cannot overwrite it.
constexpr int kHighFd = 10;

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
  void reset() { close_fd(fd_); }
  int* out() { return &fd_; }

 private:
  int fd_ = -1;
};

[[noreturn]] void throw_errno(const std::string& what, int error_number) {
  throw SubprocessError(what + ": " + std::strerror(error_number), error_number);
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

/// Some process other than `leader` in process group `pgid` is alive (not a zombie).
/// Linux has no index by group, so this reads /proc/*/stat (about 50 us per process).
bool group_has_live_members(pid_t pgid, pid_t leader) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return false;
  bool found = false;
  while (const dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    if (std::strtol(entry->d_name, nullptr, 10) == leader) continue;
    const auto stat = read_proc_stat(static_cast<pid_t>(std::strtol(entry->d_name, nullptr, 10)));
    if (stat && stat->process_group == pgid && stat->live()) {
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

/// The supervisor's command line around `options.argv` (supervisor.h).
std::vector<std::string> supervisor_argv(const SubprocessOptions& options, int status_fd) {
  std::ostringstream grace;
  grace << options.kill_grace_s;
  std::vector<std::string> argv{options.supervisor.string(),
                                "--parent",
                                std::to_string(::getpid()),
                                "--status-fd",
                                std::to_string(status_fd),
                                "--grace",
                                grace.str()};
  if (!options.cleanup_dir.empty()) {
    argv.insert(argv.end(), {"--cleanup", options.cleanup_dir.string()});
  }
  if (!options.supervisor_cgroup) argv.insert(argv.end(), {"--cgroup", "off"});
  argv.emplace_back("--");
  argv.insert(argv.end(), options.argv.begin(), options.argv.end());
  return argv;
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

  UniqueFd status_read;
  UniqueFd status_write;
  const bool supervised = !options_.supervisor.empty();
  if (supervised) {
    std::array<int, 2> status_pipe{-1, -1};
    if (::pipe2(status_pipe.data(), O_CLOEXEC) != 0) throw_errno("pipe2", errno);
    *status_read.out() = status_pipe[0];
    *status_write.out() = ::fcntl(status_pipe[1], F_DUPFD_CLOEXEC, kHighFd);
    ::close(status_pipe[1]);
    if (status_write.get() < 0) throw_errno("fcntl(F_DUPFD_CLOEXEC)", errno);
  }
  const int child_status_fd = options_.pass_fd >= 0 ? kPassedFd + 1 : kPassedFd;

  std::vector<std::string> argv_strings =
      supervised ? supervisor_argv(options_, child_status_fd) : options_.argv;
  std::vector<std::string> env_strings = child_environment(options_);
  std::vector<char*> argv = c_pointers(argv_strings);
  std::vector<char*> envp = c_pointers(env_strings);
  SpawnSetup setup;
  configure_spawn(setup, output_write.get(),
                  options_.separate_stderr ? error_write.get() : output_write.get(),
                  options_.pass_fd, status_write.get(), options_.working_dir);

  started_at_s_ = now_s();
  const int rc = posix_spawnp(&pid_, argv.front(), &setup.actions, &setup.attributes, argv.data(),
                              envp.data());
  if (rc != 0) {
    pid_ = -1;
    std::string where;
    if (!options_.working_dir.empty()) where = " in '" + options_.working_dir.string() + "'";
    throw_errno("cannot start " + quote_argv(argv_strings) + where +
                    " (program looked up in PATH unless it contains a '/'; a missing working "
                    "directory gives the same error)",
                rc);
  }
  pid_fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));  // -1: poll in slices
  output_fd_ = output_read.release();
  error_fd_ = error_read.release();
  log_fd_ = log.release();
  program_pid_ = pid_;
  if (supervised) {
    status_write.reset();
    status_fd_ = status_read.release();
    await_start();  // throws SubprocessError (the destructor does not run: clean up here)
  }
}

void Subprocess::await_start() {
  const double deadline = now_s() + kSupervisorStartMs / 1000.0;
  while (status_text_.find('\n') == std::string::npos && status_fd_ >= 0) {
    pollfd fd{status_fd_, POLLIN, 0};
    const int left_ms = static_cast<int>((deadline - now_s()) * 1000.0);
    if (left_ms <= 0 || ::poll(&fd, 1, left_ms) == 0) break;
    std::array<char, 4096> buffer{};
    const ssize_t n = ::read(status_fd_, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    status_text_.append(buffer.data(), static_cast<std::size_t>(n));
  }
  const auto newline = status_text_.find('\n');
  const auto line = supervisor::parse_status_line(
      newline == std::string::npos ? std::string_view()
                                   : std::string_view(status_text_).substr(0, newline));
  if (line && line->kind == "started") {
    program_pid_ = static_cast<pid_t>(line->first);
    containment_ = line->rest;
    status_text_.erase(0, newline + 1);
    return;
  }
  std::string output;  // the supervisor's own complaint, if any
  pollfd fd{output_fd_, POLLIN, 0};
  if (::poll(&fd, 1, 0) > 0) {
    std::array<char, 4096> buffer{};
    const ssize_t n = ::read(output_fd_, buffer.data(), buffer.size());
    if (n > 0) output.assign(buffer.data(), static_cast<std::size_t>(n));
  }
  release();
  const int error_number = line && line->kind == "failed" ? static_cast<int>(line->first) : EIO;
  if (line && line->kind == "failed") {
    std::string where;
    if (!options_.working_dir.empty()) where = " in '" + options_.working_dir.string() + "'";
    throw_errno("cannot start " + quote_argv(options_.argv) + where +
                    " (program looked up in PATH unless it contains a '/')",
                error_number);
  }
  throw SubprocessError("the supervisor " + options_.supervisor.string() + " did not start " +
                            quote_argv(options_.argv) +
                            (output.empty() ? std::string() : ": " + output),
                        error_number);
}

void Subprocess::apply_status(SubprocessResult& result) {
  for (auto newline = status_text_.find('\n'); newline != std::string::npos;
       newline = status_text_.find('\n')) {
    const auto line =
        supervisor::parse_status_line(std::string_view(status_text_).substr(0, newline));
    if (line && line->kind == "left") {
      leftovers_.push_back("pid " + std::to_string(line->first) + " " + line->rest);
    } else if (line && line->kind == "exit") {
      supervised_exit_known_ = true;
      supervised_exit_code_ = static_cast<int>(line->first);
      char* end = nullptr;
      supervised_signal_ = static_cast<int>(std::strtol(line->rest.c_str(), &end, 10));
      supervised_wall_s_ = std::strtod(end, nullptr);
    }
    status_text_.erase(0, newline + 1);
  }
  result.leftovers = leftovers_;
}

Subprocess::~Subprocess() { release(); }

void Subprocess::release() noexcept {
  kill_and_reap();
  close_fd(output_fd_);
  close_fd(error_fd_);
  close_fd(log_fd_);
  close_fd(pid_fd_);
  close_fd(status_fd_);
}

void Subprocess::kill_and_reap() noexcept {
  if (pid_ <= 0 || reaped_) return;
  if (!options_.supervisor.empty()) {  // it ends everything with SIGKILL and exits
    ::kill(pid_, SIGUSR2);
    const double until = now_s() + kSupervisorMarginS;
    while (now_s() < until && !has_exited(pid_)) ::usleep(10000);
  }
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
  std::array<pollfd, 4> fds{};
  std::array<int*, 4> owners{};
  std::array<std::string*, 4> sinks{};
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
  if (status_fd_ >= 0) {
    fds[count] = {status_fd_, POLLIN, 0};
    owners[count] = &status_fd_;
    sinks[count++] = &status_text_;
  }
  const int ready = ::poll(count > 0 ? fds.data() : nullptr, count, timeout_ms);
  if (ready <= 0) return;  // timeout or EINTR: the caller loops
  std::array<char, 65536> buffer{};
  for (nfds_t i = 0; i < count; ++i) {
    if (fds[i].revents == 0 || sinks[i] == nullptr) continue;
    const ssize_t n = ::read(*owners[i], buffer.data(), buffer.size());
    if (n > 0 && sinks[i] == &status_text_) {
      status_text_.append(buffer.data(), static_cast<std::size_t>(n));
      apply_status(result);
    } else if (n > 0) {
      append_output(buffer.data(), static_cast<std::size_t>(n), *sinks[i], result);
    } else if (n == 0 || errno != EINTR) {
      close_fd(*owners[i]);  // EOF: every writer has closed its end
    }
  }
}

SubprocessResult Subprocess::wait() {
  SubprocessResult result;
  const double grace_s = options_.kill_grace_s;
  // See Note [Subprocess lifecycle]: a supervisor gets its grace and a margin before SIGKILL.
  const double kill_after_s = options_.supervisor.empty() ? grace_s : grace_s + kSupervisorMarginS;
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
    if (term_at >= 0.0 && kill_at < 0.0 && now - term_at >= kill_after_s) {
      signal_group(SIGKILL);
      kill_at = now;
    }
    pump(kPollSliceMs, result);
  }
  close_fd(output_fd_);
  close_fd(error_fd_);
  // The supervisor has exited: its lines are all there (bounded: a descendant that escaped
  // between its fork and exec could hold the pipe).
  for (int slice = 0; status_fd_ >= 0 && slice < 20; ++slice) pump(kPollSliceMs, result);
  apply_status(result);
  result.containment = containment_;

  int status = 0;
  pid_t waited = 0;
  while ((waited = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  result.wall_s = now_s() - started_at_s_;
  if (waited == pid_ && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (waited == pid_ && WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  if (supervised_exit_known_) {  // the program's own end, not the supervisor's
    result.exit_code = supervised_exit_code_;
    result.term_signal = supervised_signal_;
    if (supervised_wall_s_ > 0) result.wall_s = supervised_wall_s_;
  }
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

namespace scalebench {

std::optional<std::filesystem::path> find_supervisor() {
  constexpr const char* kName = "scalebench-supervisor";
  std::vector<std::filesystem::path> candidates;
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) candidates.push_back(self.parent_path() / kName);
  candidates.push_back(std::filesystem::path(build_info::kBinaryDir) / "bin" / kName);
  for (const auto& candidate : candidates) {
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

}  // namespace scalebench
