// Child processes without a shell: an argument vector, captured output, a timeout that
// kills the whole process group, and an exit status.
//
// See Note [Subprocess lifecycle] in subprocess.cc for the exact order of signals.
//
// Contract:
//  * argv[0] is looked up in PATH (posix_spawnp, i.e. execvp semantics); no argument is
//    ever interpreted by a shell, so `$(...)`, `;`, quotes and globs reach the program
//    verbatim.
//  * The child runs in a new process group whose id is its pid. A timeout sends SIGTERM to
//    that group, then SIGKILL after `kill_grace_s`; when the child exits on its own, any
//    process it left behind in its group is sent the same signals, so no process of the
//    group outlives the call (a process that moved itself to another group or session, e.g.
//    with setsid, is out of reach, unless the child runs under the supervisor: see
//    SubprocessOptions::supervisor).
//  * stdin is /dev/null; stdout and stderr go to a pipe read by the caller's thread; file
//    descriptors >= 3 of the caller are not inherited, except `pass_fd`, which the child
//    receives as descriptor kPassedFd (3).
//  * Thread safety: one Subprocess per thread; distinct Subprocess objects are independent.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/base/error.h"

namespace scalebench {

/// The program could not be started (fork/spawn failed, program not found or not
/// executable, working directory missing, log file not writable). A program that starts and
/// then fails is NOT an error: it is a SubprocessResult with a non-zero status.
class SubprocessError : public Error {
 public:
  SubprocessError(const std::string& message, int error_number)
      : Error(message), error_number_(error_number) {}
  /// errno of the failed call (ENOENT: program not found, EACCES: not executable, ...).
  [[nodiscard]] int error_number() const { return error_number_; }

 private:
  int error_number_;
};

/// The descriptor number under which the child receives SubprocessOptions::pass_fd.
inline constexpr int kPassedFd = 3;

struct SubprocessOptions {
  std::vector<std::string> argv;      ///< argv[0] = program (PATH lookup); must not be empty
  std::filesystem::path working_dir;  ///< empty = the caller's current directory
  /// Environment: the caller's, minus `unset_environment` and every name that starts with one
  /// of `unset_environment_prefixes`, plus `set_environment` (which wins; of two entries of
  /// one name there, the later wins, so the child never sees a name twice).
  std::vector<std::pair<std::string, std::string>> set_environment;
  std::vector<std::string> unset_environment;
  std::vector<std::string> unset_environment_prefixes;
  double timeout_s = 0.0;     ///< wall-clock limit; 0 = none
  double kill_grace_s = 2.0;  ///< time between SIGTERM and SIGKILL of the process group
  /// false: stdout and stderr are merged, in the order written, into `output`.
  /// true: stdout goes to `output` and stderr to `error_output`.
  bool separate_stderr = false;
  /// The last this-many bytes of each captured stream are kept (earlier bytes are dropped
  /// and `output_truncated` is set). The log file always receives everything.
  std::size_t max_captured_bytes = std::size_t{16} << 20;
  /// Non-empty: all output (both streams) is appended to this file as it arrives; parent
  /// directories are created.
  std::filesystem::path log_path;
  /// >= 0: this descriptor of the caller is the child's kPassedFd (e.g. the write end of a
  /// report pipe). The caller keeps its own copy and closes it when it likes.
  int pass_fd = -1;
  /// Set: wait() calls it about every 50 ms while the child runs; when it returns false the
  /// child's group is ended as on a timeout (SIGTERM, then SIGKILL after kill_grace_s) and
  /// the result says `stopped`. It runs on the thread that called wait().
  std::function<bool()> keep_going;
  /// Non-empty: the program runs under this supervisor executable (scalebench-supervisor,
  /// Note [Program supervisor] in common/base/supervisor.cc; find_supervisor() finds it): it
  /// ends the program and everything the program started when this process dies, however it
  /// dies, and when the program exits it ends and names what the program left behind, even
  /// processes that left the group (setsid daemons). pid() is then the program's, and the
  /// result's `leftovers` and `containment` say what it did.
  std::filesystem::path supervisor;
  /// With a supervisor: a folder it removes when this process dies before the program ends.
  std::filesystem::path cleanup_dir;
  /// With a supervisor: false keeps it from making a cgroup (its subreaper only; the tests
  /// check both mechanisms with it).
  bool supervisor_cgroup = true;
};

struct SubprocessResult {
  int exit_code = -1;        ///< the program's exit code; -1 if it was ended by a signal
  int term_signal = 0;       ///< the signal that ended it; 0 if it exited
  bool timed_out = false;    ///< the timeout fired (the group was signalled because of it)
  bool stopped = false;      ///< keep_going returned false (the group was signalled for it)
  std::string output;        ///< stdout (+ stderr unless separate_stderr), tail-limited
  std::string error_output;  ///< stderr when separate_stderr, else empty
  bool output_truncated = false;
  /// From spawn to reaping the child; with a supervisor, the program's own run time (exec
  /// to exit), without the end of what it left behind.
  double wall_s = 0.0;
  /// Supervised only: the processes the program left behind when it exited, each ended,
  /// as "pid 123 (comm) command line" (printable ASCII; at most 16 named).
  std::vector<std::string> leftovers;
  /// What owned the program's processes: "cgroup" or "subreaper" (supervised), else
  /// "process group" (Note [Program supervisor]).
  std::string containment;

  /// Exited by itself with status 0.
  [[nodiscard]] bool ok() const { return !timed_out && term_signal == 0 && exit_code == 0; }
  /// Shell convention: the exit code, or 128 + signal number when ended by a signal.
  [[nodiscard]] int shell_status() const {
    return term_signal != 0 ? 128 + term_signal : exit_code;
  }
  /// "exit status 3", "killed by signal 9 (SIGKILL)", "timed out after 1 s; killed by ...".
  [[nodiscard]] std::string describe(double timeout_s = 0.0) const;
};

/// A running child process (RAII). The constructor starts it; `wait()` reads its output
/// until it ends and returns the result. If the object is destroyed before `wait()`
/// returned (e.g. an exception unwinds), the process group is killed with SIGKILL and the
/// child is reaped: no zombie and no orphan of the group is left.
class Subprocess {
 public:
  /// Starts the program. Throws SubprocessError when it cannot be started, InputError when
  /// argv is empty or a timeout is negative.
  explicit Subprocess(SubprocessOptions options);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  Subprocess(Subprocess&&) = delete;
  Subprocess& operator=(Subprocess&&) = delete;

  /// Process id (= process group id) of the program (with a supervisor, the supervisor's
  /// child).
  [[nodiscard]] pid_t pid() const { return program_pid_; }

  /// Blocks until the child has ended (by itself or by the timeout) and its group has been
  /// cleaned up; returns the result. Call at most once.
  SubprocessResult wait();

 private:
  /// Waits up to `timeout_ms` for output and reads what is there; closes a pipe at EOF.
  void pump(int timeout_ms, SubprocessResult& result);
  void append_output(const char* data, std::size_t size, std::string& sink,
                     SubprocessResult& result);
  void signal_group(int signal_number) const;
  void kill_and_reap() noexcept;
  /// Ends the child (kill_and_reap) and closes every descriptor this object holds.
  void release() noexcept;
  /// Supervised: reads the supervisor's first status line (started or failed).
  void await_start();
  /// Supervised: applies the complete status lines received so far to `result`.
  void apply_status(SubprocessResult& result);

  SubprocessOptions options_;
  pid_t pid_ = -1;
  int output_fd_ = -1;       ///< read end of the stdout (or merged) pipe; owned
  int error_fd_ = -1;        ///< read end of the stderr pipe when separate_stderr; owned
  int log_fd_ = -1;          ///< append-only log file; owned
  int pid_fd_ = -1;          ///< pidfd of the child (readable once it exits); -1 if unsupported
  int status_fd_ = -1;       ///< read end of the supervisor's status pipe; owned
  pid_t program_pid_ = -1;   ///< the program: pid_, or the supervisor's child
  std::string status_text_;  ///< status bytes not yet applied (a partial line)
  std::string containment_ = "process group";
  int supervised_exit_code_ = -1;  ///< from the supervisor's exit line
  int supervised_signal_ = 0;
  double supervised_wall_s_ = 0;
  bool supervised_exit_known_ = false;
  std::vector<std::string> leftovers_;
  bool reaped_ = false;
  double started_at_s_ = 0.0;
};

/// The scalebench-supervisor executable: next to this process's executable (bin/ of a build
/// or an installation), else in the bin/ of the build this was built in; nullopt when neither
/// holds an executable one.
std::optional<std::filesystem::path> find_supervisor();

/// Starts `options.argv`, waits, and returns the result. Throws like Subprocess().
SubprocessResult run_subprocess(SubprocessOptions options);

/// argv as a copy-pasteable, POSIX-shell-quoted line, for logs and messages only (it is
/// never executed). Control characters are shown as $'\n'-style escapes.
std::string quote_argv(const std::vector<std::string>& argv);

/// The last `max_lines` lines of `text`, at most `max_bytes` bytes (cut at a line start
/// where possible), prefixed with "...\n" when something was dropped.
std::string tail_lines(const std::string& text, std::size_t max_lines, std::size_t max_bytes);

}  // namespace scalebench
