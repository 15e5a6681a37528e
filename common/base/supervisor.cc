#include "common/base/supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace scalebench::supervisor {

// Note [Program supervisor]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The promise (docs/reliability.md): no process a program cell starts outlives its cell or
// the job, whichever rank dies. A worker rank SIGKILLed (by mpirun after another rank died,
// by the OOM killer, by a user) runs no destructor, so the program cannot be ended by the
// worker; something else must, and it must own every process the program starts, also those
// that leave the program's process group (setsid daemons, double forks).
//
// So the worker starts this supervisor (Subprocess with SubprocessOptions::supervisor) and the
// supervisor starts the program:
//  * Tied to the worker: the supervisor holds the write end of a status pipe whose only read
//    end is the worker's (O_CLOEXEC there); poll() reports POLLERR on it as soon as the
//    worker is gone, however it died. PR_SET_PDEATHSIG (SIGHUP) is a second path (it fires
//    when the worker's spawning thread ends), checked with getppid() against the worker's pid
//    given on the command line, so a worker that died before the prctl is noticed too.
//  * Tied to the supervisor: the program runs with PR_SET_PDEATHSIG = SIGKILL (set between
//    fork and exec, then getppid() checked for the same race), so if the supervisor itself is
//    killed the program dies with it.
//  * Owning what the program starts: a cgroup v2 of its own where the machine lets us create
//    one (a folder beside the supervisor's own cgroup; the program moves itself into it
//    before exec): every descendant stays inside whatever it does, and cgroup.kill ends them
//    as a unit (Slurm's proctrack/cgroup, systemd scopes). Where no cgroup can be made
//    (cgroup v1 only, a read-only /sys/fs/cgroup, no delegation), PR_SET_CHILD_SUBREAPER:
//    a process whose parent exits is adopted by the supervisor rather than by init, so the
//    supervisor's descendants (found in /proc) are everything the program started. The
//    "started" status line names the mechanism; the cell records it.
//  * Ending: SIGTERM (from Subprocess: a timeout or a stop) or the worker's death sends
//    SIGTERM to the program's process group and to every owned process, SIGKILL to all of
//    them `grace` seconds later. When the program exits by itself, the owned processes still
//    alive 100 ms later are its leftovers: each is named in a "left" status line (the cell's
//    record names them) and ended the same way. SIGUSR2 (Subprocess's destructor) ends
//    everything with SIGKILL at once.
//  * The cell's folder (--cleanup) is removed by the supervisor when the worker died first
//    (the worker removes it otherwise).
// Cost: nothing while the program runs (one poll per second for the parent check); /proc is
// read only while ending (every 100 ms, about 10 us a process). Starting it is a fork+exec of
// a small binary (a few ms).
// Limit: a process that leaves both the cgroup (needs write access to another cgroup) and,
// without cgroups, the supervisor's descendants (only by being re-parented by another
// subreaper) is out of reach; so is a process started through another service (systemd-run,
// a container daemon).

namespace {

constexpr double kLeftoverDelayS = 0.1;  // after the program's exit, before naming leftovers
constexpr int kTickMs = 100;             // while ending
constexpr int kIdleMs = 1000;            // while the program runs: the parent check

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool write_text(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

/// A live process of /proc (zombies left out).
struct Process {
  pid_t pid = 0;
  pid_t parent = 0;
};

std::vector<Process> live_processes() {
  std::vector<Process> processes;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return processes;
  while (const dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    const std::string stat = read_text(std::string("/proc/") + entry->d_name + "/stat");
    const auto paren = stat.rfind(')');
    char state = 0;
    long parent = 0;
    if (paren == std::string::npos ||
        std::sscanf(stat.c_str() + paren + 1, " %c %ld", &state, &parent) != 2)
      continue;
    if (state == 'Z' || state == 'X') continue;
    processes.push_back(
        {static_cast<pid_t>(std::strtol(entry->d_name, nullptr, 10)), static_cast<pid_t>(parent)});
  }
  ::closedir(proc);
  return processes;
}

/// The live descendants of `root`.
std::vector<pid_t> descendants_of(pid_t root) {
  const auto processes = live_processes();
  std::vector<pid_t> found{root};
  for (std::size_t i = 0; i < found.size(); ++i) {
    for (const auto& p : processes) {
      if (p.parent == found[i]) found.push_back(p.pid);
    }
  }
  found.erase(found.begin());
  return found;
}

/// "(comm) command line", printable, at most kMaxLeftoverBytes.
std::string describe(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  std::string comm = read_text(base + "/comm");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  std::string command = read_text(base + "/cmdline");
  while (!command.empty() && command.back() == '\0') command.pop_back();
  std::string text = "(" + comm + ") " + command;
  if (text.size() > kMaxLeftoverBytes) text.resize(kMaxLeftoverBytes);
  for (char& c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\0') {
      c = ' ';  // between arguments
    } else if (u < 0x20 || u >= 0x7f) {
      c = '?';  // one line of ASCII: no terminal escapes, valid UTF-8
    }
  }
  return text;
}

/// A cgroup v2 of the supervisor's program (Note [Program supervisor]).
class Cgroup {
 public:
  /// A new cgroup beside this process's own; nullopt where none can be made.
  static std::optional<Cgroup> create() {
    const auto folder =
        cgroup2_folder(read_text("/proc/self/mountinfo"), read_text("/proc/self/cgroup"));
    if (!folder) return std::nullopt;
    sweep_stale(*folder);
    Cgroup cgroup;
    cgroup.path_ = *folder + "/scalebench-supervisor-" + std::to_string(::getpid());
    if (::mkdir(cgroup.path_.c_str(), 0755) != 0) return std::nullopt;
    return cgroup;
  }
  Cgroup(Cgroup&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  Cgroup& operator=(Cgroup&&) = delete;
  Cgroup(const Cgroup&) = delete;
  Cgroup& operator=(const Cgroup&) = delete;
  ~Cgroup() { remove(); }

  [[nodiscard]] std::string procs_file() const { return path_ + "/cgroup.procs"; }

  [[nodiscard]] std::vector<pid_t> members() const {
    std::vector<pid_t> pids;
    std::istringstream in(read_text(procs_file()));
    for (long pid = 0; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
    return pids;
  }

  /// SIGKILL to every member: cgroup.kill (Linux 5.14+), else one by one.
  void kill_all() const {
    if (write_text(path_ + "/cgroup.kill", "1")) return;
    for (pid_t pid : members()) ::kill(pid, SIGKILL);
  }

  void remove() {
    if (path_.empty()) return;
    for (int attempt = 0; attempt < 50 && ::rmdir(path_.c_str()) != 0 && errno == EBUSY;
         ++attempt) {
      ::usleep(10000);  // the last members are still leaving
    }
    path_.clear();
  }

 private:
  Cgroup() = default;

  /// Empty cgroups of supervisors that were killed before removing theirs.
  static void sweep_stale(const std::string& folder) {
    DIR* dir = ::opendir(folder.c_str());
    if (dir == nullptr) return;
    constexpr std::string_view kPrefix = "scalebench-supervisor-";
    while (const dirent* entry = ::readdir(dir)) {
      const std::string_view name(entry->d_name);
      if (name.substr(0, kPrefix.size()) != kPrefix) continue;
      const long pid = std::strtol(entry->d_name + kPrefix.size(), nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
        ::rmdir((folder + "/" + std::string(name)).c_str());  // fails while populated: kept
      }
    }
    ::closedir(dir);
  }

  std::string path_;
};

void write_status(int& fd, const std::string& line) {
  if (fd < 0) return;
  const std::string text = line + "\n";
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {  // EPIPE: the worker is gone
      ::close(fd);
      fd = -1;
      return;
    }
    done += static_cast<std::size_t>(n);
  }
}

/// Messages from the program's side of the fork to the supervisor, before exec.
enum class ChildNote : char { kNotInCgroup = 'C', kExecFailed = 'E' };

/// Forks and execs the program: own process group, PR_SET_PDEATHSIG SIGKILL, into the
/// cgroup when there is one, default signal mask. Returns its pid; `exec_errno` is set when
/// exec failed, `in_cgroup` false when it could not join the cgroup.
pid_t start_program(const Arguments& arguments, const std::optional<Cgroup>& cgroup,
                    int& exec_errno, bool& in_cgroup) {
  std::vector<char*> argv;
  for (const auto& arg : arguments.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const std::string procs = cgroup ? cgroup->procs_file() : std::string();
  int notes[2] = {-1, -1};
  if (::pipe2(notes, O_CLOEXEC) != 0) {
    exec_errno = errno;
    return -1;
  }
  const pid_t supervisor = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    exec_errno = errno;
    ::close(notes[0]);
    ::close(notes[1]);
    return -1;
  }
  if (pid == 0) {  // the program's side: async-signal-safe calls only (the supervisor's
                   // single thread makes more safe, but nothing more is needed)
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != supervisor) ::_exit(127);  // it died before the prctl
    if (!procs.empty()) {
      const int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) {
        const char note = static_cast<char>(ChildNote::kNotInCgroup);
        (void)!::write(notes[1], &note, 1);
      }
      if (fd >= 0) ::close(fd);
    }
    struct sigaction defaults {};
    defaults.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s) ::sigaction(s, &defaults, nullptr);
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
    ::execvp(argv[0], argv.data());
    const int error = errno;
    char message[1 + sizeof(int)];
    message[0] = static_cast<char>(ChildNote::kExecFailed);
    std::memcpy(message + 1, &error, sizeof(int));
    (void)!::write(notes[1], message, sizeof(message));
    ::_exit(127);
  }
  ::close(notes[1]);
  char buffer[64];
  std::string received;
  for (ssize_t n = 0; (n = ::read(notes[0], buffer, sizeof(buffer))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    received.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(notes[0]);
  in_cgroup = received.find(static_cast<char>(ChildNote::kNotInCgroup)) == std::string::npos;
  const auto failed = received.find(static_cast<char>(ChildNote::kExecFailed));
  if (failed != std::string::npos && received.size() >= failed + 1 + sizeof(int)) {
    std::memcpy(&exec_errno, received.data() + failed + 1, sizeof(int));
  }
  return pid;
}

/// The state of one supervision (Note [Program supervisor]).
class Supervision {
 public:
  Supervision(const Arguments& arguments, std::optional<Cgroup> cgroup, pid_t program)
      : arguments_(arguments),
        status_fd_(arguments.status_fd),
        cgroup_(std::move(cgroup)),
        program_(program) {}

  /// Runs until the program and everything it started are gone; returns the exit status.
  int loop(int signal_fd) {
    while (true) {
      const double now = now_s();
      if (!parent_gone_ && ::getppid() != arguments_.parent) parent_gone(now);
      const auto owned = owned_processes();
      if (program_done_) {
        if (owned.empty()) break;
        if (!leftovers_named_ && now - exited_at_ >= kLeftoverDelayS) {
          name_leftovers(owned);
          begin_end(now);
        }
      }
      if (term_at_ >= 0 && now - term_at_ >= arguments_.grace_s) kill_all(owned);
      wait_for_events(signal_fd, now);
    }
    cgroup_.reset();
    if (parent_gone_ && !arguments_.cleanup_dir.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(arguments_.cleanup_dir, ignored);
    }
    int code = -1;
    int signal_number = 0;
    if (WIFEXITED(program_status_)) code = WEXITSTATUS(program_status_);
    if (WIFSIGNALED(program_status_)) signal_number = WTERMSIG(program_status_);
    std::ostringstream wall;
    wall.precision(6);
    wall << std::fixed << exited_at_ - started_at_;
    write_status(status_fd_, "exit " + std::to_string(code) + " " + std::to_string(signal_number) +
                                 " " + wall.str());
    return signal_number != 0 ? 128 + signal_number : code;
  }

 private:
  /// Live processes the supervisor owns, the program included until it is reaped.
  [[nodiscard]] std::vector<pid_t> owned_processes() const {
    if (!program_done_ && term_at_ < 0) return {program_};  // running: no scan (no cost)
    std::vector<pid_t> owned;
    if (cgroup_) {
      owned = cgroup_->members();
    } else {
      owned = descendants_of(::getpid());
    }
    if (!program_done_ && std::find(owned.begin(), owned.end(), program_) == owned.end())
      owned.push_back(program_);
    return owned;
  }

  void begin_end(double now) {
    if (term_at_ >= 0) return;
    term_at_ = now;
    if (!program_done_) ::kill(-program_, SIGTERM);
    for (pid_t pid : owned_processes()) ::kill(pid, SIGTERM);
  }

  void kill_all(const std::vector<pid_t>& owned) {
    if (!program_done_) ::kill(-program_, SIGKILL);
    if (cgroup_) cgroup_->kill_all();
    for (pid_t pid : owned) ::kill(pid, SIGKILL);
  }

  void name_leftovers(const std::vector<pid_t>& owned) {
    leftovers_named_ = true;
    int named = 0;
    for (pid_t pid : owned) {
      if (named++ == kMaxNamedLeftovers) break;
      write_status(status_fd_, "left " + std::to_string(pid) + " " + describe(pid));
    }
  }

  void parent_gone(double now) {
    parent_gone_ = true;
    if (status_fd_ >= 0) ::close(status_fd_);
    status_fd_ = -1;
    begin_end(now);
  }

  void reap(double now) {
    int status = 0;
    for (pid_t pid = 0; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      if (pid == program_) {
        program_done_ = true;
        program_status_ = status;
        exited_at_ = now;
      }
    }
  }

  void wait_for_events(int signal_fd, double now) {
    pollfd fds[2] = {{signal_fd, POLLIN, 0}, {status_fd_, 0, 0}};
    const bool ending = program_done_ || term_at_ >= 0;
    ::poll(fds, status_fd_ >= 0 ? 2 : 1, ending ? kTickMs : kIdleMs);
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info{};
      while (::read(signal_fd, &info, sizeof(info)) == sizeof(info)) {
        if (info.ssi_signo == SIGCHLD) reap(now_s());
        if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT) begin_end(now);
        if (info.ssi_signo == SIGUSR2) {
          if (term_at_ < 0) term_at_ = now - arguments_.grace_s;  // kill at once
        }
      }
    }
    if (status_fd_ >= 0 && (fds[1].revents & (POLLERR | POLLHUP)) != 0) parent_gone(now);
    reap(now_s());  // also a SIGCHLD merged into an earlier one
  }

  const Arguments& arguments_;
  int status_fd_;
  std::optional<Cgroup> cgroup_;
  pid_t program_;
  int program_status_ = 0;
  bool program_done_ = false;
  bool parent_gone_ = false;
  bool leftovers_named_ = false;
  double started_at_ = now_s();  ///< just after the program's exec
  double exited_at_ = -1;
  double term_at_ = -1;
};

double parse_number(const std::string& flag, const std::string& value) {
  std::size_t used = 0;
  double number = 0;
  try {
    number = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || !(number >= 0))
    throw std::invalid_argument(flag + " takes a number >= 0, not '" + value + "'");
  return number;
}

}  // namespace

Arguments parse_arguments(const std::vector<std::string>& args) {
  Arguments parsed;
  std::size_t i = 1;
  for (; i < args.size() && args[i] != "--"; ++i) {
    const std::string& flag = args[i];
    if (i + 1 >= args.size() || args[i + 1] == "--")
      throw std::invalid_argument(flag + " needs a value");
    const std::string& value = args[++i];
    if (flag == "--parent") {
      parsed.parent = static_cast<pid_t>(parse_number(flag, value));
    } else if (flag == "--status-fd") {
      parsed.status_fd = static_cast<int>(parse_number(flag, value));
    } else if (flag == "--grace") {
      parsed.grace_s = parse_number(flag, value);
    } else if (flag == "--cleanup") {
      parsed.cleanup_dir = value;
    } else if (flag == "--cgroup") {
      if (value != "auto" && value != "off")
        throw std::invalid_argument("--cgroup takes auto or off, not '" + value + "'");
      parsed.use_cgroup = value == "auto";
    } else {
      throw std::invalid_argument("unknown argument '" + flag + "'");
    }
  }
  if (i >= args.size() || i + 1 == args.size())
    throw std::invalid_argument("no program: give it after '--'");
  parsed.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  if (parsed.parent <= 1) throw std::invalid_argument("--parent needs the worker's pid");
  return parsed;
}

std::optional<std::string> cgroup2_folder(std::string_view mountinfo, std::string_view cgroup) {
  std::optional<std::string> relative;
  std::istringstream cgroup_lines{std::string(cgroup)};
  for (std::string line; std::getline(cgroup_lines, line);) {
    if (line.rfind("0::", 0) == 0) relative = line.substr(3);
  }
  if (!relative || relative->empty() || relative->find(" (deleted)") != std::string::npos)
    return std::nullopt;
  // mountinfo: id parent major:minor root mount-point options... - fstype source options
  std::istringstream mount_lines{std::string(mountinfo)};
  for (std::string line; std::getline(mount_lines, line);) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream after(line.substr(dash + 3));
    std::string fstype;
    after >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream before(line.substr(0, dash));
    std::string id, parent, device, root, mount_point;
    before >> id >> parent >> device >> root >> mount_point;
    // A mount of a sub-tree (a container's namespace root) shows paths below its root.
    std::string path = *relative;
    if (root != "/" && path.rfind(root, 0) == 0) path = path.substr(root.size());
    if (path == "/") path.clear();
    return mount_point + path;
  }
  return std::nullopt;
}

std::optional<StatusLine> parse_status_line(std::string_view line) {
  const auto first_space = line.find(' ');
  if (first_space == std::string_view::npos) return std::nullopt;
  StatusLine parsed;
  parsed.kind = std::string(line.substr(0, first_space));
  if (parsed.kind != "started" && parsed.kind != "failed" && parsed.kind != "left" &&
      parsed.kind != "exit")
    return std::nullopt;
  const std::string rest(line.substr(first_space + 1));
  std::size_t used = 0;
  try {
    parsed.first = std::stol(rest, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  parsed.rest = used < rest.size() ? rest.substr(used + 1) : std::string();
  return parsed;
}

int run(const Arguments& arguments) {
  int status_fd = arguments.status_fd;
  ::fcntl(status_fd, F_SETFD, FD_CLOEXEC);  // the program must not hold it
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t handled;
  sigemptyset(&handled);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR2}) sigaddset(&handled, s);
  ::sigprocmask(SIG_BLOCK, &handled, nullptr);
  const int signal_fd = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::prctl(PR_SET_PDEATHSIG, SIGHUP);
  if (::getppid() != arguments.parent || signal_fd < 0) {  // the worker is already gone
    if (!arguments.cleanup_dir.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(arguments.cleanup_dir, ignored);
    }
    write_status(status_fd, "failed " + std::to_string(ECHILD) + " the worker ended first");
    return 127;
  }

  std::optional<Cgroup> cgroup = arguments.use_cgroup ? Cgroup::create() : std::nullopt;
  int exec_errno = 0;
  bool in_cgroup = true;
  const pid_t program = start_program(arguments, cgroup, exec_errno, in_cgroup);
  if (!in_cgroup) cgroup.reset();
  if (program < 0 || exec_errno != 0) {
    if (program > 0) {
      int ignored = 0;
      ::waitpid(program, &ignored, 0);
    }
    write_status(status_fd,
                 "failed " + std::to_string(exec_errno) + " " + std::strerror(exec_errno));
    return 127;
  }
  write_status(status_fd,
               "started " + std::to_string(program) + " " + (cgroup ? "cgroup" : "subreaper"));
  Arguments kept = arguments;
  kept.status_fd = status_fd;
  Supervision supervision(kept, std::move(cgroup), program);
  return supervision.loop(signal_fd);
}

}  // namespace scalebench::supervisor
