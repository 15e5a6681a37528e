// `scalebench submit <matrix> -o results.h5 --nodes N --gpus-per-node G ...`: render the
// Slurm batch script (orchestrator/submit_script.h) and hand it to `sbatch` on its
// standard input, with an argument vector (no shell). Prints the job id; --dry-run
// prints the script instead. See docs/cluster-guide.md.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "matrix/resolved_matrix.h"
#include "orchestrator/commands.h"
#include "orchestrator/submit_script.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;

/// Owns one file descriptor; closes it once.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { reset(); }
  [[nodiscard]] int get() const { return fd_; }
  /// Closes the descriptor held (if any) and takes `fd`.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

/// Ignores SIGPIPE while alive (sbatch may exit before reading all of its input; the write
/// then fails with EPIPE instead of killing this process).
class IgnoreSigpipe {
 public:
  IgnoreSigpipe() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &previous_);
  }
  IgnoreSigpipe(const IgnoreSigpipe&) = delete;
  IgnoreSigpipe& operator=(const IgnoreSigpipe&) = delete;
  ~IgnoreSigpipe() { ::sigaction(SIGPIPE, &previous_, nullptr); }

 private:
  struct sigaction previous_ {};
};

[[noreturn]] void throw_errno(const std::string& what) {
  throw Error("scalebench submit: " + what + ": " + std::strerror(errno));
}

void make_pipe(FileDescriptor& read_end, FileDescriptor& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe");
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
}

/// Runs `sbatch --parsable` with `script` on its standard input; returns what it printed
/// on standard output. Its standard error goes to ours, so its own message is shown.
std::string run_sbatch(const std::string& script) {
  FileDescriptor stdin_read, stdin_write, stdout_read, stdout_write;
  make_pipe(stdin_read, stdin_write);
  make_pipe(stdout_read, stdout_write);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, stdin_read.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, stdout_write.get(), STDOUT_FILENO);
  std::vector<std::string> args{"sbatch", "--parsable"};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawn_rc = ::posix_spawnp(&pid, "sbatch", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_rc != 0) {
    errno = spawn_rc;
    throw_errno("cannot run sbatch (is Slurm installed and on PATH?)");
  }
  stdin_read.reset();
  stdout_write.reset();
  {
    const IgnoreSigpipe ignore_sigpipe;
    std::size_t written = 0;
    while (written < script.size()) {
      const ssize_t n =
          ::write(stdin_write.get(), script.data() + written, script.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;  // sbatch stopped reading: its exit status and message say why
      written += static_cast<std::size_t>(n);
    }
    stdin_write.reset();
  }
  std::string output;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(stdout_read.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buffer, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw_errno("waitpid(sbatch)");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error("scalebench submit: sbatch failed (" +
                (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                   : "killed by signal " + std::to_string(WTERMSIG(status))) +
                "); its message is above");
  }
  return output;
}

fs::path existing_file(const std::string& flag, const std::string& text) {
  fs::path path = fs::absolute(text);
  if (!fs::is_regular_file(path)) {
    throw InputError("scalebench submit: " + flag + " '" + text + "': no such file");
  }
  return path;
}

fs::path output_file(const std::string& text) {
  fs::path path = fs::absolute(text);
  const fs::path parent = path.parent_path();
  if (!fs::is_directory(parent)) {
    throw InputError("scalebench submit: -o '" + text + "': the folder " + parent.string() +
                     " does not exist; create it first (the job writes the file there)");
  }
  return path;
}

struct SubmitArgs {
  std::string matrix;
  std::string output;
  std::string setup_file;
  bool dry_run = false;
  SubmitOptions options;
};

void add_options(CLI::App& command, SubmitArgs& args) {
  SubmitOptions& o = args.options;
  command.add_option("matrix", args.matrix, "Matrix file (.yaml, .yml or .csv)")->required();
  command.add_option("-o,--output", args.output, "Results file (HDF5); a later job resumes it")
      ->required();
  command.add_option("--nodes", o.nodes, "Number of nodes")->required();
  command
      .add_option("--gpus-per-node", o.gpus_per_node,
                  "GPUs per node, one worker each; 0 for CPU-only workers")
      ->required();
  command.add_option("--workers-per-node", o.workers_per_node,
                     "CPU workers per node (only with --gpus-per-node 0)");
  command.add_option("--partition", o.partition, "Slurm partition(s)");
  command.add_option("--time", o.time_limit, "Time limit, e.g. 30, 2:00:00, 1-12");
  command.add_option("--account", o.account, "Slurm account to charge");
  command.add_option("--constraint", o.constraint, "Node features, e.g. a100&ib");
  command.add_option("--job-name", o.job_name, "Slurm job name")->capture_default_str();
  command.add_option("--setup-file", args.setup_file,
                     "Shell file sourced by the job before srun (modules, virtualenv)");
  command
      .add_option("--signal-lead-s", o.signal_lead_s,
                  "Seconds before the time limit at which the job is asked to stop cleanly")
      ->capture_default_str();
  command.add_flag("--requeue", o.requeue,
                   "Requeue the job when it was interrupted (exit status 3), to resume");
  command.add_flag("--dry-run", args.dry_run, "Print the batch script; submit nothing");
}

void submit(SubmitArgs& args, int& exit_status) {
  SubmitOptions& o = args.options;
  o.scalebench_exe = fs::read_symlink("/proc/self/exe");
  o.matrix_path = existing_file("matrix", args.matrix);
  o.output_path = output_file(args.output);
  if (!args.setup_file.empty()) o.setup_file = existing_file("--setup-file", args.setup_file);
  validate_submit_options(o);
  const SubmitLayout layout = submit_layout(o);
  // Reject a bad matrix now rather than after the job waited in the queue: refs that name
  // no commit and experiment files of the branch trees (read-only git) included.
  const ResolvedMatrix matrix = resolve_matrix(
      o.matrix_path,
      {.limits = {.max_world_size = o.nodes * layout.workers_per_node}, .work_dir = {}});
  for (const auto& warning : matrix.warnings()) std::cerr << warning << "\n";
  const std::string script = render_batch_script(o);
  if (args.dry_run) {
    std::cout << script;
  } else {
    std::cout << parse_sbatch_job_id(run_sbatch(script)) << "\n";
  }
  exit_status = kExitOk;
}

}  // namespace

void add_submit_command(CLI::App& app, int& exit_status) {
  auto* command =
      app.add_subcommand("submit", "Submit a matrix as a Slurm batch job (prints the job id)");
  auto args = std::make_shared<SubmitArgs>();
  add_options(*command, *args);
  command->callback([args, &exit_status] { submit(*args, exit_status); });
}

}  // namespace scalebench
