#include "protocol/program_cell.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <vector>

#include "common/base/logging.h"
#include "common/base/subprocess.h"
#include "common/cell/program.h"
#include "protocol/mpi_check.h"
#include "protocol/program_report.h"

namespace scalebench {

// Note [Program cells]
// ~~~~~~~~~~~~~~~~~~~~
// Each rank of the group starts the cell's command (placeholders substituted, Note [Program
// placeholders]) in the branch's tree, as its own process group, with the environment of a
// torchrun worker (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK,
// MASTER_ADDR, MASTER_PORT from a port group rank 0 found free, TORCHELASTIC_*), and without
// the launcher's variables (OMPI_*, PMIX_*, PMI_*, SLURM_*, ...): a child that saw them would
// take itself for an MPI rank (a nested MPI_Init fails, open-mpi/ompi#12027). The program
// writes records to descriptor 3 (SCALEBENCH_REPORT_FD; Note [Program report channel]).
//
// Bounds: a program silent for timeout_s (no record, no exit) is ended, SIGTERM then SIGKILL
// to its group, and the rank records `timeout`. A rank whose program fails (exit status,
// signal, error record, malformed record) sends kProgramStop to the other ranks of the group,
// which end theirs (phase `group`): a DDP program never waits forever in a collective for a
// dead peer. After its program is gone every rank counts, with one allreduce, the ranks that
// sent a stop and receives exactly the stops meant for it, so no message outlives the cell.
//
// Clock: the group's origin is a barrier just before the launch (steady_clock, which is
// CLOCK_MONOTONIC, the clock of time.monotonic() in the client).

namespace {

constexpr std::size_t kTailLines = 40;
constexpr std::size_t kTailBytes = 4096;

/// Environment variables of the launcher that a child must not see (prefixes).
const std::array<const char*, 9> kScrubbedPrefixes{"OMPI_", "PMIX_",  "PMI_",   "SLURM_",   "PRTE_",
                                                   "OPAL_", "HYDRA_", "I_MPI_", "MPI_LOCAL"};

std::vector<std::string> scrubbed_names() {
  std::vector<std::string> names;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const std::string name = text.substr(0, text.find('='));
    for (const char* prefix : kScrubbedPrefixes) {
      if (name.rfind(prefix, 0) == 0) names.push_back(name);
    }
  }
  return names;
}

/// A TCP port that was free a moment ago (bind to port 0), for MASTER_PORT.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 29500;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = 29500;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

double steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double epoch_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// The hosts of the group's ranks, in group-rank order.
std::vector<std::string> group_hosts(const std::string& host, MPI_Comm group, int size) {
  constexpr int kHostBytes = 256;
  std::array<char, kHostBytes> mine{};
  host.copy(mine.data(), kHostBytes - 1);
  std::vector<char> all(static_cast<size_t>(kHostBytes) * static_cast<size_t>(size));
  MPI_CHECK(
      MPI_Allgather(mine.data(), kHostBytes, MPI_CHAR, all.data(), kHostBytes, MPI_CHAR, group));
  std::vector<std::string> hosts;
  hosts.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r)
    hosts.emplace_back(all.data() + static_cast<size_t>(r) * kHostBytes);
  return hosts;
}

/// The read end of a pipe, non-blocking, owned; drained into a text buffer.
class ReportPipe {
 public:
  ReportPipe() {
    std::array<int, 2> fds{-1, -1};
    if (::pipe2(fds.data(), O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    read_fd_ = fds[0];
    write_fd_ = fds[1];
    ::fcntl(read_fd_, F_SETFL, ::fcntl(read_fd_, F_GETFL) | O_NONBLOCK);
  }
  ~ReportPipe() {
    close_write();
    if (read_fd_ >= 0) ::close(read_fd_);
  }
  ReportPipe(const ReportPipe&) = delete;
  ReportPipe& operator=(const ReportPipe&) = delete;
  [[nodiscard]] int write_fd() const { return write_fd_; }
  void close_write() {
    if (write_fd_ >= 0) ::close(write_fd_);
    write_fd_ = -1;
  }
  /// Appends what is there to `buffer`; true when anything was read.
  bool drain(std::string& buffer) {
    bool any = false;
    std::array<char, 65536> chunk{};
    while (true) {
      const ssize_t n = ::read(read_fd_, chunk.data(), chunk.size());
      if (n > 0) {
        buffer.append(chunk.data(), static_cast<size_t>(n));
        any = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return any;
    }
  }

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
};

/// What ended this rank's program, before the group is told.
struct LocalOutcome {
  CellStatus status = CellStatus::kOk;
  FailurePhase phase = FailurePhase::kNone;
  std::string reason;
  bool sends_stop = false;  ///< its own failure (not an echo of another rank's)
};

}  // namespace

RankResult run_program_cell(const Assignment& assignment, MPI_Comm group,
                            const WorkerContext& context, const std::string& device) {
  const CellSpec& cell = assignment.cell;
  RankResult result;
  result.cell_id = cell.cell_id;
  result.world_rank = context.world_rank;
  result.host = context.host;
  result.device = device;
  int group_rank = 0;
  int group_size = 1;
  MPI_CHECK(MPI_Comm_rank(group, &group_rank));
  MPI_CHECK(MPI_Comm_size(group, &group_size));
  result.group_rank = group_rank;

  // The ranks' layout as torchrun would give it: node = distinct host, in group-rank order.
  const auto hosts = group_hosts(context.host, group, group_size);
  std::vector<std::string> nodes;
  int local_rank = 0;
  int local_world = 0;
  for (int r = 0; r < group_size; ++r) {
    if (std::find(nodes.begin(), nodes.end(), hosts[r]) == nodes.end()) nodes.push_back(hosts[r]);
    if (hosts[r] == context.host) {
      if (r < group_rank) ++local_rank;
      ++local_world;
    }
  }
  const auto node_rank = std::find(nodes.begin(), nodes.end(), context.host) - nodes.begin();
  int port = group_rank == 0 ? free_port() : 0;
  MPI_CHECK(MPI_Bcast(&port, 1, MPI_INT, 0, group));

  const auto output_dir =
      std::filesystem::temp_directory_path() /
      ("scalebench-program-" + cell.cell_id + "-" + std::to_string(::getpid())) /
      ("rank" + std::to_string(group_rank));
  std::error_code ignored;
  std::filesystem::create_directories(output_dir, ignored);

  LocalOutcome local;
  SubprocessOptions options;
  try {
    const auto values = placeholder_values(cell, output_dir.string(), device);
    for (const auto& arg : cell.program.command) {
      options.argv.push_back(substitute_placeholders(arg, values));
    }
    for (const auto& [name, value] : cell.program.env) {
      options.set_environment.emplace_back(name, substitute_placeholders(value, values));
    }
  } catch (const std::invalid_argument& e) {
    local = {CellStatus::kFailed, FailurePhase::kSetup, e.what(), true};
  }
  const std::string step_phase = cell.mode == Mode::kTrain ? "step" : "batch";
  auto set = [&](const std::string& name, const std::string& value) {
    options.set_environment.emplace_back(name, value);
  };
  set("RANK", std::to_string(group_rank));
  set("LOCAL_RANK", std::to_string(local_rank));
  set("WORLD_SIZE", std::to_string(group_size));
  set("LOCAL_WORLD_SIZE", std::to_string(local_world));
  set("GROUP_RANK", std::to_string(node_rank));
  set("NODE_RANK", std::to_string(node_rank));
  set("MASTER_ADDR", hosts[0]);
  set("MASTER_PORT", std::to_string(port));
  set("TORCHELASTIC_RUN_ID", cell.cell_id);
  set("TORCHELASTIC_RESTART_COUNT", "0");
  set("TORCHELASTIC_MAX_RESTARTS", "0");
  set("TORCHELASTIC_ERROR_FILE", (output_dir / "error.json").string());
  set("CUDA_VISIBLE_DEVICES", device == "cuda" ? std::to_string(context.local_index) : "");
  if (cell.cpu_threads > 0) set("OMP_NUM_THREADS", std::to_string(cell.cpu_threads));
  set("SCALEBENCH_REPORT_FD", std::to_string(kPassedFd));
  set("SCALEBENCH_CELL_ID", cell.cell_id);
  set("SCALEBENCH_WARMUP", std::to_string(cell.warmup_iterations));
  set("SCALEBENCH_ITERATIONS", std::to_string(cell.measured_iterations));
  set("SCALEBENCH_BATCH_SIZE", std::to_string(cell.batch_size));
  set("SCALEBENCH_PRECISION", to_string(cell.precision));
  set("SCALEBENCH_DEVICE", device);
  set("SCALEBENCH_MODE", to_string(cell.mode));
  options.unset_environment = scrubbed_names();
  options.working_dir = std::filesystem::path(assignment.tree);

  ProgramReport report;
  std::string buffer;
  std::string record_error;
  bool silent = false;
  bool peer_failed = false;
  SubprocessResult exit;
  MPI_CHECK(MPI_Barrier(group));  // Note [Shared cell clock]: the origin
  const double origin_s = steady_s();
  result.metrics["loop_origin_epoch_s"] = epoch_s();
  if (local.status == CellStatus::kOk) {
    ReportPipe pipe;
    options.pass_fd = pipe.write_fd();
    double last_sign_s = origin_s;
    options.keep_going = [&]() {
      try {
        if (pipe.drain(buffer)) last_sign_s = steady_s();
        apply_records(report, buffer);
      } catch (const ProgramRecordError& e) {
        record_error = e.what();
        return false;
      }
      int waiting = 0;
      MPI_Status status;
      MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, static_cast<int>(Tag::kProgramStop), group, &waiting,
                           &status));
      if (waiting != 0) {
        peer_failed = true;
        return false;
      }
      if (steady_s() - last_sign_s > cell.timeout_s) {
        silent = true;
        return false;
      }
      return true;
    };
    try {
      Subprocess child(options);
      pipe.close_write();  // the child holds the only write end: EOF when it is gone
      exit = child.wait();
      pipe.drain(buffer);
      if (record_error.empty()) {
        buffer += '\n';  // a last line without its newline still counts
        apply_records(report, buffer);
      }
    } catch (const ProgramRecordError& e) {
      record_error = e.what();
    } catch (const SubprocessError& e) {
      local = {CellStatus::kFailed, FailurePhase::kSetup, e.what(), true};
    }
    const std::string tail = tail_lines(exit.output, kTailLines, kTailBytes);
    const std::string ran = "program " + quote_argv(options.argv);
    if (local.status != CellStatus::kOk) {
      // could not start: already set
    } else if (!record_error.empty()) {
      local = {CellStatus::kFailed, FailurePhase::kLoop, record_error + "; " + ran, true};
    } else if (peer_failed) {
      local = {CellStatus::kFailed, FailurePhase::kGroup,
               "another rank's program failed; this rank's was ended", false};
    } else if (silent) {
      local = {CellStatus::kTimeout, FailurePhase::kLoop,
               ran + " reported nothing for timeout_s = " + std::to_string(cell.timeout_s) +
                   " s and was ended; output:\n" + tail,
               true};
    } else if (!exit.ok() || report.error_kind) {
      const bool oom = report.error_kind == std::optional<std::string>("oom") ||
                       (exit.term_signal == SIGKILL && !exit.stopped && !exit.timed_out);
      std::string why = report.error_kind ? report.error_message : exit.describe();
      local = {oom ? CellStatus::kOom : CellStatus::kFailed, FailurePhase::kLoop,
               ran + " failed (" + exit.describe() + "): " + why + "; output:\n" + tail, true};
    } else if (report.hello &&
               (report.hello_rank != group_rank || report.hello_world_size != group_size)) {
      local = {CellStatus::kFailed, FailurePhase::kSetup,
               ran + " saw rank " + std::to_string(report.hello_rank) + " of " +
                   std::to_string(report.hello_world_size) + ", scalebench assigned rank " +
                   std::to_string(group_rank) + " of " + std::to_string(group_size) +
                   " (does it read RANK and WORLD_SIZE?)",
               true};
    }
  }

  // Note [Program cells]: the group learns of every failure; no stop message outlives it.
  std::vector<MPI_Request> sends;
  if (local.sends_stop) {
    for (int r = 0; r < group_size; ++r) {
      if (r == group_rank) continue;
      sends.emplace_back();
      MPI_CHECK(MPI_Isend(nullptr, 0, MPI_BYTE, r, static_cast<int>(Tag::kProgramStop), group,
                          &sends.back()));
    }
  }
  int senders = local.sends_stop ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &senders, 1, MPI_INT, MPI_SUM, group));
  for (int k = 0; k < senders - (local.sends_stop ? 1 : 0); ++k) {
    MPI_CHECK(MPI_Recv(nullptr, 0, MPI_BYTE, MPI_ANY_SOURCE, static_cast<int>(Tag::kProgramStop),
                       group, MPI_STATUS_IGNORE));
  }
  if (!sends.empty()) {
    MPI_CHECK(MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE));
  }
  if (senders > 0 && local.status == CellStatus::kOk) {
    local = {CellStatus::kFailed, FailurePhase::kGroup, "another rank's program failed", false};
  }
  std::filesystem::remove_all(output_dir.parent_path(), ignored);

  const auto timings = program_timings(report, step_phase, origin_s, exit.wall_s);
  result.phases = timings.phases;
  result.timings_s = timings.timings_s;
  result.phase_starts_s = timings.phase_starts_s;
  result.warmup_iterations = timings.warmup_iterations;
  result.status = local.status;
  result.failed_phase = local.phase;
  result.reason = local.reason;
  result.metrics["loop_wall_s"] = exit.wall_s;
  result.metrics["program_exit_status"] = exit.shell_status();
  const auto measured = static_cast<double>(result.iterations() - timings.warmup_iterations);
  result.metrics["measured_iterations"] = measured;
  if (report.steps.empty()) result.metrics["no_iteration_timings"] = 1.0;
  if (cell.mode == Mode::kInfer) {
    result.metrics["samples"] = measured * static_cast<double>(cell.batch_size);
  }
  if (report.peak_memory_bytes >= 0) {
    result.metrics[report.memory_kind == "cuda" ? "peak_allocated_bytes" : "peak_rss_bytes"] =
        report.peak_memory_bytes;
  }
  for (const auto& [name, value] : report.metrics) {
    result.metrics[name == "loss" ? "final_loss" : "program_" + name] = value;
  }
  result.effective["program_framework"] = report.framework.empty() ? "none" : report.framework;
  if (const auto client = report.versions.find("client"); client != report.versions.end()) {
    result.effective["program_client"] = client->second;
  }
  if (!report.steps.empty() || local.status != CellStatus::kOk) return result;
  result.ineffective_reasons.push_back(
      "timings: the program reported no iterations (no scalebench_client): one measurement, "
      "its wall time; no per-iteration timings");
  return result;
}

}  // namespace scalebench
