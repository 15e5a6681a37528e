// The program supervisor: a small single-threaded process between a worker rank and the
// program it starts, so that nothing the program starts outlives the rank or the program
// (Note [Program supervisor] in supervisor.cc).
//
// It is the executable `scalebench-supervisor` (supervisor_main.cc), built from this file and
// the C and C++ runtime only, so it starts in a few milliseconds; Subprocess starts it when
// SubprocessOptions::supervisor is set and speaks the status protocol below with it.
//
// Command line:
//   scalebench-supervisor --parent PID --status-fd FD --grace S [--cleanup DIR]
//                         [--cgroup auto|off] -- ARGV...
// Status lines it writes on FD (one line each, in this order):
//   started <program pid> <mechanism>     the program runs; mechanism "cgroup" or "subreaper"
//   failed <errno> <text>                 the program could not be started (then it exits 127)
//   left <pid> <name and command line>    a process the program left behind (at most
//                                         kMaxNamedLeftovers; all are ended)
//   exit <exit code> <signal> <wall s>    how the program ended (-1 / 0 when not known) and
//                                         its run time, exec to exit (its leftovers' end,
//                                         up to the grace, is not in it)
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scalebench::supervisor {

/// At most this many leftovers are named in status lines (all are ended).
inline constexpr int kMaxNamedLeftovers = 16;
/// A leftover's description is cut at this many bytes.
inline constexpr std::size_t kMaxLeftoverBytes = 200;

struct Arguments {
  pid_t parent = 0;               ///< the worker rank; its death ends the program
  int status_fd = -1;             ///< write end of the status pipe (the parent holds the read end)
  double grace_s = 2.0;           ///< SIGTERM, then SIGKILL this much later
  std::string cleanup_dir;        ///< removed when the parent dies first (empty: none)
  bool use_cgroup = true;         ///< --cgroup auto (default) or off (the subreaper only)
  std::vector<std::string> argv;  ///< the program (PATH lookup)
};

/// Parses the command line (argv[0] is the supervisor). Throws std::invalid_argument naming
/// the bad argument.
Arguments parse_arguments(const std::vector<std::string>& args);

/// The folder of this process's cgroup v2, from the texts of /proc/self/mountinfo and
/// /proc/self/cgroup; nullopt when there is no cgroup2 mount or no "0::" line (cgroup v1
/// only), or the cgroup was removed.
std::optional<std::string> cgroup2_folder(std::string_view mountinfo, std::string_view cgroup);

/// One status line, parsed (Subprocess's side of the protocol).
struct StatusLine {
  std::string kind;  ///< started, failed, left, exit
  long first = 0;    ///< the pid, errno or exit code
  std::string rest;  ///< mechanism, text, description or signal
};
/// nullopt for a line that is not one of the four kinds.
std::optional<StatusLine> parse_status_line(std::string_view line);

/// Runs the supervisor; returns its exit status (the program's, 128 + signal when a signal
/// ended it, 127 when it could not be started).
int run(const Arguments& arguments);

}  // namespace scalebench::supervisor
