#include "protocol/program/program_cell.h"

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
#include <fstream>
#include <optional>
#include <stdexcept>
#include <vector>

#include "common/base/escaped_text.h"
#include "common/base/logging.h"
#include "common/base/process_memory.h"
#include "common/base/subprocess.h"
#include "common/cell/program.h"
#include "common/cell/stats.h"
#include "protocol/group_probe.h"
#include "protocol/mpi_check.h"
#include "protocol/program/program_report.h"

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
// Bounds: a program still running at timeout_s (the cell's limit, as for built-in cells) is
// ended, SIGTERM then SIGKILL to its group, and the rank records `timeout`. A rank whose program
// fails (exit status, signal, error record, malformed record) sends kProgramStop to the other ranks
// of the group, which end theirs (phase `group`): a DDP program never waits forever in a collective
// for a dead peer. After its program is gone every rank counts, with one allreduce, the ranks that
// sent a stop and receives exactly the stops meant for it, so no message outlives the cell.
//
// Clock: the group's origin is a barrier just before the launch (steady_clock, which is
// CLOCK_MONOTONIC, the clock of time.monotonic() in the client).
//
// Note [Program memory budget]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A program cell has a memory budget when `memory_limit_mb` is set, and a CPU cell with
// `batch_size: auto` also without it (the node's MemAvailable shared by its workers, taken
// once before the first probe, as for built-in cells). The budget binds for real:
//  * CPU: while the program runs the worker sums the resident sets of its process group
//    (every process it started, data-loader workers included) every 200 ms (it reads
//    /proc/<pid>/stat of every process of the node: about 10 us a process, so a few
//    milliseconds a second on a busy node); above the budget the group is ended (SIGTERM,
//    then SIGKILL) and the rank records `oom` ("over the memory budget"). The program's
//    own report of its peak resident set (`sb.memory()`: VmHWM, exact but of the main
//    process only) above the budget counts too, so an allocation shorter than the period
//    is not missed.
//  * GPU: the program receives SCALEBENCH_MEMORY_BUDGET_BYTES, and the client caps torch's
//    CUDA allocator at that share of the device (`set_per_process_memory_fraction`), so an
//    allocation beyond it raises torch.OutOfMemoryError; a reported CUDA peak above the
//    budget counts too.
// A batch search (`batch_size: auto`) relaunches the program once per probe at the probe's
// batch (one warm-up and `probe_iterations` measured steps) under the same budget; the group
// agrees on each probe (Note [Group probes], protocol/group_probe.h): an `oom` record or a
// kill by the kernel marks `oom`, the budget `over_budget`. So the boundary it finds is the
// boundary of direct runs of the same program with the same budget.

namespace {

/// The float32 file of handed outputs, in the rank's output folder (SCALEBENCH_OUTPUTS_FILE).
constexpr const char* kOutputsFile = "validation_outputs.f32";
constexpr std::size_t kTailLines = 40;
constexpr std::size_t kTailBytes = 4096;
constexpr double kMiB = 1024.0 * 1024.0;
/// Note [Program memory budget]: how often the resident set of a program's group is summed.
constexpr std::chrono::milliseconds kRssSampleInterval{200};

/// Environment variables of the launcher that a child must not see (prefixes).
const std::vector<std::string> kScrubbedPrefixes{"OMPI_", "PMIX_",  "PMI_",   "SLURM_",   "PRTE_",
                                                 "OPAL_", "HYDRA_", "I_MPI_", "MPI_LOCAL"};

/// A TCP port that was free a moment ago (bind to port 0), for MASTER_PORT; 0 when none
/// could be found (no socket or no bind: the cell then fails in phase setup).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = 0;
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
  bool sends_stop = false;   ///< its own failure (not an echo of another rank's)
  bool over_budget = false;  ///< the memory budget ended it (Note [Program memory budget])
};

/// This rank's place in the group as torchrun would give it: a node is a distinct host, in
/// group-rank order; the master is group rank 0's host at a port it found free.
struct TorchrunLayout {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 0;
  int node_rank = 0;
  int nodes = 1;
  std::string master_addr;
  int master_port = 0;  ///< 0: group rank 0 found no free port
};

TorchrunLayout torchrun_layout(const std::string& host, MPI_Comm group) {
  TorchrunLayout layout;
  MPI_CHECK(MPI_Comm_rank(group, &layout.rank));
  MPI_CHECK(MPI_Comm_size(group, &layout.world));
  const auto hosts = group_hosts(host, group, layout.world);
  std::vector<std::string> nodes;
  for (int r = 0; r < layout.world; ++r) {
    if (std::find(nodes.begin(), nodes.end(), hosts[r]) == nodes.end()) nodes.push_back(hosts[r]);
    if (hosts[r] == host) {
      if (r < layout.rank) ++layout.local_rank;
      ++layout.local_world;
    }
  }
  layout.node_rank = static_cast<int>(std::find(nodes.begin(), nodes.end(), host) - nodes.begin());
  layout.nodes = static_cast<int>(nodes.size());
  layout.master_addr = hosts[0];
  layout.master_port = layout.rank == 0 ? free_port() : 0;
  MPI_CHECK(MPI_Bcast(&layout.master_port, 1, MPI_INT, 0, group));
  return layout;
}

/// The command with its placeholders filled, and its environment: the launch contract of
/// docs/programs.md, then the experiment's `env`. Throws std::invalid_argument for a
/// placeholder that cannot be filled.
SubprocessOptions launch_options(const Assignment& assignment, const TorchrunLayout& layout,
                                 const WorkerContext& context, const std::string& device,
                                 const std::filesystem::path& output_dir, double budget_bytes) {
  const CellSpec& cell = assignment.cell;
  SubprocessOptions options;
  auto values = placeholder_values(cell, output_dir.string(), device);
  values["local_world_size"] = std::to_string(layout.local_world);
  values["num_nodes"] = std::to_string(layout.nodes);
  options.argv = program_argv(cell.program, values);
  auto set = [&](const std::string& name, const std::string& value) {
    options.set_environment.emplace_back(name, value);
  };
  set("RANK", std::to_string(layout.rank));
  set("LOCAL_RANK", std::to_string(layout.local_rank));
  set("WORLD_SIZE", std::to_string(layout.world));
  set("LOCAL_WORLD_SIZE", std::to_string(layout.local_world));
  set("GROUP_RANK", std::to_string(layout.node_rank));
  set("NODE_RANK", std::to_string(layout.node_rank));
  set("MASTER_ADDR", layout.master_addr);
  set("MASTER_PORT", std::to_string(layout.master_port));
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
  if (cell.validate) {  // Note [Accuracy across cells]: this rank's share of the samples
    const int64_t share = cell.validation_samples / layout.world +
                          (layout.rank < cell.validation_samples % layout.world ? 1 : 0);
    set("SCALEBENCH_OUTPUTS_FILE", (output_dir / kOutputsFile).string());
    set("SCALEBENCH_VALIDATION_SAMPLES", std::to_string(share));
  }
  if (budget_bytes > 0) {
    set("SCALEBENCH_MEMORY_BUDGET_BYTES", std::to_string(static_cast<int64_t>(budget_bytes)));
  }
  // `python:` as if its environment were activated: its folder first on PATH, so that the
  // program's own subprocesses (torchrun, a data tool) come from it too.
  const std::filesystem::path interpreter(values["python"]);
  if (!cell.program.python.empty() && interpreter.has_parent_path()) {
    const char* path = std::getenv("PATH");
    set("PATH", interpreter.parent_path().string() + (path ? ":" + std::string(path) : ""));
  }
  options.unset_environment_prefixes = kScrubbedPrefixes;
  // The experiment's env comes last: of two entries of one name the later wins (Subprocess),
  // so a user may override a variable of the contract (OMP_NUM_THREADS, ...) on purpose.
  for (const auto& [name, value] : cell.program.env) {
    options.set_environment.emplace_back(name, substitute_placeholders(value, values));
  }
  options.working_dir = std::filesystem::path(assignment.tree);
  return options;
}

/// The outputs the program handed (Note [Accuracy across cells]): the float32 file the client
/// wrote, whose size the `outputs` records announced. nullopt when it handed none. Throws
/// CellError (validation) for a file that does not hold what the records say.
std::optional<OutputArray> handed_outputs(const ProgramReport& report,
                                          const std::filesystem::path& file) {
  if (report.output_samples == 0) return std::nullopt;
  OutputArray outputs;
  outputs.shape.push_back(report.output_samples);
  outputs.shape.insert(outputs.shape.end(), report.output_sample_shape.begin(),
                       report.output_sample_shape.end());
  const auto expected = static_cast<uintmax_t>(outputs.element_count()) * sizeof(float);
  std::error_code error;
  const auto size = std::filesystem::file_size(file, error);
  if (error || size != expected) {
    throw CellError(FailurePhase::kValidation,
                    "the program's outputs file " + file.string() + " holds " +
                        (error ? std::string("nothing") : std::to_string(size) + " bytes") +
                        " but its outputs records announce " + shape_text(outputs.shape) +
                        " float32 values (" + std::to_string(expected) + " bytes)");
  }
  outputs.values.resize(static_cast<size_t>(outputs.element_count()));
  std::ifstream in(file, std::ios::binary);
  in.read(reinterpret_cast<char*>(outputs.values.data()), static_cast<std::streamsize>(expected));
  if (!in) {
    throw CellError(FailurePhase::kValidation,
                    "could not read the program's outputs file " + file.string());
  }
  return outputs;
}

/// One run of the program and what it reported.
struct ProgramRun {
  ProgramReport report;
  SubprocessResult exit;
  std::string record_error;  ///< a malformed record (Note [Program report channel])
  bool peer_failed = false;  ///< ended because another rank's program failed
  bool over_budget = false;  ///< ended by Note [Program memory budget]'s resident-set check
  double sampled_peak_rss_bytes = -1;  ///< largest resident set of its group seen (-1: none)
};

/// Runs the program to its end, reading its records as they come; ends it early on a
/// malformed record, a kProgramStop from the group, or at `timeout_s` (the cell's limit, as
/// for every cell: the worker ends the program before rank 0's watchdog, which allows
/// timeout_s + its grace, gives up on the cell). Throws SubprocessError when it cannot be
/// started.
ProgramRun run_and_read(SubprocessOptions options, MPI_Comm group, double timeout_s,
                        double rss_budget_bytes) {
  ProgramRun run;
  std::string buffer;
  ReportPipe pipe;
  pid_t child_group = 0;
  auto next_sample = std::chrono::steady_clock::now();
  options.pass_fd = pipe.write_fd();
  options.timeout_s = timeout_s;
  options.keep_going = [&]() {
    const auto now = std::chrono::steady_clock::now();
    if (rss_budget_bytes > 0 && child_group > 0 && now >= next_sample) {
      next_sample = now + kRssSampleInterval;  // Note [Program memory budget]
      const auto rss = static_cast<double>(process_group_rss_bytes(child_group));
      run.sampled_peak_rss_bytes = std::max(run.sampled_peak_rss_bytes, rss);
      if (rss > rss_budget_bytes) {
        run.over_budget = true;
        return false;
      }
    }
    try {
      pipe.drain(buffer);
      apply_records(run.report, buffer);
    } catch (const ProgramRecordError& e) {
      run.record_error = e.what();
      return false;
    }
    int waiting = 0;
    MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, static_cast<int>(Tag::kProgramStop), group, &waiting,
                         MPI_STATUS_IGNORE));
    run.peer_failed = waiting != 0;
    return !run.peer_failed;
  };
  Subprocess child(options);
  child_group = child.pid();
  pipe.close_write();  // the child holds the only write end
  run.exit = child.wait();
  pipe.drain(buffer);
  if (run.record_error.empty()) {
    buffer += '\n';  // a last line without its newline still counts
    try {
      apply_records(run.report, buffer);
    } catch (const ProgramRecordError& e) {
      run.record_error = e.what();
    }
  }
  return run;
}

/// The bounded, printable tail of a program's output (stdout and stderr merged).
std::string output_tail(const ProgramRun& run) {
  return printable_output(tail_lines(run.exit.output, kTailLines, kTailBytes));
}

/// The largest memory known of a run: its reported peak, or its group's sampled resident
/// set; -1 when neither.
double measured_peak_bytes(const ProgramRun& run) {
  return std::max(run.report.peak_memory_bytes, run.sampled_peak_rss_bytes);
}

/// What ended this rank's program, in the order of Note [Program cells]'s failures table
/// (docs/programs.md#failures).
LocalOutcome outcome_of(const ProgramRun& run, const std::vector<std::string>& argv,
                        const TorchrunLayout& layout, double timeout_s, double budget_bytes) {
  const std::string ran = "program " + quote_argv(argv);
  const std::string tail = output_tail(run);
  const ProgramReport& report = run.report;
  if (!run.record_error.empty()) {
    return {CellStatus::kFailed, FailurePhase::kLoop, run.record_error + "; " + ran, true};
  }
  if (run.peer_failed) {
    return {CellStatus::kFailed, FailurePhase::kGroup,
            "another rank's program failed; this rank's was ended", false};
  }
  const double peak = measured_peak_bytes(run);
  if (run.over_budget || (budget_bytes > 0 && peak > budget_bytes)) {
    LocalOutcome over{CellStatus::kOom, FailurePhase::kLoop,
                      ran + (run.over_budget ? " was ended: its" : ": its") + " memory reached " +
                          std::to_string(std::lround(peak / kMiB)) +
                          " MiB, over the memory budget of " +
                          std::to_string(std::lround(budget_bytes / kMiB)) +
                          " MiB (memory_limit_mb, docs/programs.md#memory); lower the batch "
                          "size or raise memory_limit_mb",
                      true};
    over.over_budget = true;
    return over;
  }
  if (run.exit.timed_out) {
    return {CellStatus::kTimeout, FailurePhase::kLoop,
            ran + " ran past timeout_s = " + std::to_string(timeout_s) +
                " s and was ended; output:\n" + tail,
            true};
  }
  if (!run.exit.ok() || report.error_kind) {
    // An outside SIGKILL is the kernel's OOM killer; ours come only after a stop or timeout.
    const bool oom = report.error_kind == std::optional<std::string>("oom") ||
                     (run.exit.term_signal == SIGKILL && !run.exit.stopped && !run.exit.timed_out);
    const std::string why = report.error_kind ? report.error_message : run.exit.describe();
    return {oom ? CellStatus::kOom : CellStatus::kFailed, FailurePhase::kLoop,
            ran + " failed (" + run.exit.describe() + "): " + why + "; output:\n" + tail, true};
  }
  if (report.hello &&
      (report.hello_rank != layout.rank || report.hello_world_size != layout.world)) {
    return {CellStatus::kFailed, FailurePhase::kSetup,
            ran + " saw rank " + std::to_string(report.hello_rank) + " of " +
                std::to_string(report.hello_world_size) + ", scalebench assigned rank " +
                std::to_string(layout.rank) + " of " + std::to_string(layout.world) +
                " (does it read RANK and WORLD_SIZE?)",
            true};
  }
  return {};
}

/// Note [Program cells]: every rank whose own program failed tells the others; returns how
/// many did, after receiving exactly the stops meant for this rank (none outlives the cell).
int exchange_stops(bool sends_stop, MPI_Comm group, const TorchrunLayout& layout) {
  std::vector<MPI_Request> sends;
  if (sends_stop) {
    sends.reserve(static_cast<size_t>(layout.world));
    for (int r = 0; r < layout.world; ++r) {
      if (r == layout.rank) continue;
      sends.emplace_back();
      MPI_CHECK(MPI_Isend(nullptr, 0, MPI_BYTE, r, static_cast<int>(Tag::kProgramStop), group,
                          &sends.back()));
    }
  }
  int senders = sends_stop ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &senders, 1, MPI_INT, MPI_SUM, group));
  for (int k = 0; k < senders - (sends_stop ? 1 : 0); ++k) {
    MPI_CHECK(MPI_Recv(nullptr, 0, MPI_BYTE, MPI_ANY_SOURCE, static_cast<int>(Tag::kProgramStop),
                       group, MPI_STATUS_IGNORE));
  }
  if (!sends.empty()) {
    MPI_CHECK(MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE));
  }
  return senders;
}

/// The rank's timings, metrics and effective values from what its program reported.
void record_report(RankResult& result, const ProgramRun& run, const CellSpec& cell,
                   double origin_s) {
  const ProgramReport& report = run.report;
  const auto timings = program_timings(report, cell.mode == Mode::kTrain ? "step" : "batch",
                                       origin_s, run.exit.wall_s);
  result.phases = timings.phases;
  result.timings_s = timings.timings_s;
  result.phase_starts_s = timings.phase_starts_s;
  result.warmup_iterations = timings.warmup_iterations;
  result.metrics["loop_wall_s"] = run.exit.wall_s;
  result.metrics["program_exit_status"] = run.exit.shell_status();
  const auto measured = static_cast<double>(result.iterations() - timings.warmup_iterations);
  result.metrics["measured_iterations"] = measured;
  if (report.steps.empty()) {
    result.metrics["no_iteration_timings"] = 1.0;
  } else {  // the program's own start-up: interpreter, imports, model, data, until step 0
    result.metrics["program_startup_s"] = report.steps.front().begin - origin_s;
  }
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
}

/// One launch of the program on this rank, with the group's agreement on how it ended.
struct Attempt {
  ProgramRun run;
  LocalOutcome local;
  std::vector<std::string> argv;
  double origin_s = 0;  ///< Note [Shared cell clock]: the group's barrier before the launch
  double origin_epoch_s = 0;
};

/// Launches `assignment`'s program (its cell's batch and iterations) on every rank of the
/// group and waits for all of them: a rank whose program fails makes the others end theirs
/// (Note [Program cells]). Collective over `group`.
Attempt attempt_program(const Assignment& assignment, const TorchrunLayout& layout,
                        const WorkerContext& context, const std::string& device,
                        const std::filesystem::path& output_dir, double budget_bytes,
                        double timeout_s, MPI_Comm group) {
  Attempt attempt;
  std::error_code ignored;
  std::filesystem::remove_all(output_dir, ignored);  // each launch starts with an empty folder
  std::filesystem::create_directories(output_dir, ignored);
  SubprocessOptions options;
  if (layout.master_port == 0) {
    attempt.local = {CellStatus::kFailed, FailurePhase::kSetup,
                     "group rank 0 found no free TCP port for MASTER_PORT", true};
  } else if (timeout_s <= 0) {
    attempt.local = {CellStatus::kTimeout, FailurePhase::kLoop,
                     "timeout_s passed before the program could be started", true};
  } else {
    try {
      options = launch_options(assignment, layout, context, device, output_dir, budget_bytes);
      attempt.argv = options.argv;
    } catch (const std::invalid_argument& e) {
      attempt.local = {CellStatus::kFailed, FailurePhase::kSetup, e.what(), true};
    }
  }
  MPI_CHECK(MPI_Barrier(group));  // Note [Shared cell clock]: the origin
  attempt.origin_s = steady_s();
  attempt.origin_epoch_s = epoch_s();
  if (attempt.local.status == CellStatus::kOk) {
    const double rss_budget = device == "cpu" ? budget_bytes : 0;
    try {
      attempt.run = run_and_read(options, group, timeout_s, rss_budget);
      attempt.local = outcome_of(attempt.run, options.argv, layout, timeout_s, budget_bytes);
    } catch (const SubprocessError& e) {
      attempt.local = {CellStatus::kFailed, FailurePhase::kSetup, e.what(), true};
    }
  }
  const int senders = exchange_stops(attempt.local.sends_stop, group, layout);
  if (senders > 0 && attempt.local.status == CellStatus::kOk) {
    attempt.local = {CellStatus::kFailed, FailurePhase::kGroup, "another rank's program failed",
                     false};
  }
  return attempt;
}

/// The budget of Note [Program memory budget], bytes (0: none).
double program_budget_bytes(const CellSpec& cell, const std::string& device,
                            const WorkerContext& context) {
  if (cell.memory_limit_mb > 0) return cell.memory_limit_mb * kMiB;
  if (cell.batch_size != kBatchAuto || device != "cpu") return 0;
  return available_memory_share_bytes(context.local_workers);
}

/// A probe's view on this rank (Note [Group probes]): its status and measured step times.
LocalProbe local_probe(const Attempt& attempt, const CellSpec& probe_cell) {
  LocalProbe probe;
  probe.peak_bytes = std::max(0.0, measured_peak_bytes(attempt.run));
  const LocalOutcome& local = attempt.local;
  if (local.over_budget) {
    probe.status = ProbeStatus::kOverBudget;
  } else if (local.status == CellStatus::kOom) {
    probe.status = ProbeStatus::kOom;
  } else if (local.status == CellStatus::kTimeout) {
    probe.timed_out = true;
  } else if (local.status != CellStatus::kOk && local.phase != FailurePhase::kGroup) {
    probe.failure = local.reason;
  }
  if (local.status != CellStatus::kOk) return probe;  // a rank ended by another: no times
  const std::string step = probe_cell.mode == Mode::kTrain ? "step" : "batch";
  const auto timings = program_timings(attempt.run.report, step, 0, attempt.run.exit.wall_s);
  const auto column = static_cast<size_t>(
      std::find(timings.phases.begin(), timings.phases.end(), step) - timings.phases.begin());
  const size_t rows = timings.phases.empty() ? 0 : timings.timings_s.size() / timings.phases.size();
  for (size_t row = static_cast<size_t>(timings.warmup_iterations); row < rows; ++row) {
    probe.times_s.push_back(timings.timings_s[row * timings.phases.size() + column]);
  }
  const Summary summary = summarize(probe.times_s);
  probe.median_s = summary.median;
  probe.p99_s = summary.p99;
  return probe;
}

/// Note [Program memory budget]: the batch search of a program cell. Returns the chosen
/// batch, or 0 with `result` failed (status, phase batch_search, reason). Collective.
int64_t search_program_batch(const Assignment& assignment, const TorchrunLayout& layout,
                             const WorkerContext& context, const std::string& device,
                             const std::filesystem::path& output_dir, double budget_bytes,
                             std::chrono::steady_clock::time_point deadline, MPI_Comm group,
                             RankResult& result) {
  const CellSpec& cell = assignment.cell;
  const auto start = std::chrono::steady_clock::now();
  const auto record_search = [&] {
    result.metrics["memory_budget_bytes"] = budget_bytes;
    result.metrics["batch_search_s"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const auto fail = [&](CellStatus status, const std::string& reason) {
    record_search();
    result.status = status;
    result.failed_phase = FailurePhase::kBatchSearch;
    result.reason = reason;
    return int64_t{0};
  };
  BatchSearch search(cell.min_batch, cell.max_batch);
  while (const auto next = search.next()) {
    Assignment probe = assignment;
    probe.cell = probe_cell(cell, *next, cell.probe_iterations);
    const double left =
        std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    const Attempt attempt =
        attempt_program(probe, layout, context, device, output_dir, budget_bytes, left, group);
    const GroupOutcome reduced =
        reduce_probe(local_probe(attempt, probe.cell), *next, layout.world, group);
    if (reduced.failed) {
      return fail(CellStatus::kFailed, probe_failed_reason(*next, attempt.local.reason));
    }
    if (reduced.timed_out) {
      return fail(CellStatus::kTimeout, search_timeout_reason(*next, result.probes.size()));
    }
    result.probes.push_back(reduced.probe);
    search.record(reduced.probe.status == ProbeStatus::kOk);
    SB_LOG(info) << "program batch search: " << *next << " " << to_string(reduced.probe.status)
                 << ", median " << reduced.probe.median_s * 1e3 << " ms, peak "
                 << reduced.probe.peak_memory_bytes / kMiB << " MiB";
  }
  record_search();
  const GroupChoice choice = choose_batch(result.probes, cell, budget_bytes, group);
  if (choice.figures.max_batch_ok == 0) {
    return fail(CellStatus::kOom,
                nothing_fits_reason(cell, result.probes.front(), choice.budget_bytes));
  }
  return choice.figures.recommended_batch;
}

}  // namespace

RankResult run_program_cell(const Assignment& assignment, MPI_Comm group,
                            const WorkerContext& context, const std::string& device) {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(assignment.cell.timeout_s));
  const TorchrunLayout layout = torchrun_layout(context.host, group);
  RankResult result;
  result.cell_id = assignment.cell.cell_id;
  result.world_rank = context.world_rank;
  result.group_rank = layout.rank;
  result.host = context.host;
  result.device = device;

  const auto cell_dir =
      std::filesystem::temp_directory_path() /
      ("scalebench-program-" + assignment.cell.cell_id + "-" + std::to_string(::getpid()));
  const auto output_dir = cell_dir / ("rank" + std::to_string(layout.rank));
  const double budget_bytes = program_budget_bytes(assignment.cell, device, context);
  Assignment timed = assignment;
  if (assignment.cell.batch_size == kBatchAuto) {  // Note [Program memory budget]
    const int64_t batch = search_program_batch(assignment, layout, context, device, output_dir,
                                               budget_bytes, deadline, group, result);
    if (batch == 0) {
      std::error_code ignored;
      std::filesystem::remove_all(cell_dir, ignored);
      return result;
    }
    timed.cell.batch_size = batch;
    result.metrics["batch_size"] = static_cast<double>(batch);
    result.effective["batch_size"] = std::to_string(batch);
  } else if (budget_bytes > 0) {
    result.metrics["memory_budget_bytes"] = budget_bytes;
  }
  const double left =
      std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
  const Attempt attempt =
      attempt_program(timed, layout, context, device, output_dir, budget_bytes, left, group);
  std::optional<OutputArray> outputs;
  std::optional<CellError> outputs_error;
  try {
    outputs = handed_outputs(attempt.run.report, output_dir / kOutputsFile);
  } catch (const CellError& e) {
    outputs_error = e;
  }
  std::error_code ignored;
  std::filesystem::remove_all(cell_dir, ignored);

  const ProgramRun& run = attempt.run;
  result.metrics["loop_origin_epoch_s"] = attempt.origin_epoch_s;
  record_report(result, run, timed.cell, attempt.origin_s);
  if (run.sampled_peak_rss_bytes >= 0) {
    result.metrics["peak_group_rss_bytes"] = run.sampled_peak_rss_bytes;
  }
  if (!attempt.argv.empty()) result.program = ProgramInvocation{attempt.argv, output_tail(run)};
  result.status = attempt.local.status;
  result.failed_phase = attempt.local.phase;
  result.reason = attempt.local.reason;
  if (timed.cell.validate) {  // Note [Accuracy across cells]: rank 0 compares once stored
    result.validation_outputs = std::move(outputs);
    if (outputs_error && result.status == CellStatus::kOk) {
      result.status = CellStatus::kFailed;
      result.failed_phase = outputs_error->phase();
      result.reason = outputs_error->what();
    }
  }
  if (run.report.steps.empty() && attempt.local.status == CellStatus::kOk) {
    result.ineffective_reasons.push_back(
        "timings: the program reported no iterations (no scalebench_client): one measurement, "
        "its wall time; no per-iteration timings");
  }
  return result;
}

}  // namespace scalebench
