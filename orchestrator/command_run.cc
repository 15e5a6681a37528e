// `scalebench run <matrix> -o results.h5` under mpirun/srun: rank 0 orchestrates, ranks
// 1..N are workers. See Note [Orchestrator protocol] and docs/user-guide.md.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>
#include <set>

#include "common/branch_resolution.h"
#include "common/error.h"
#include "common/logging.h"
#include "common/matrix.h"
#include "common/mpi_comm.h"
#include "common/provenance.h"
#include "common/results_store.h"
#include "common/tree_experiments.h"
#include "orchestrator/cell_inputs.h"
#include "orchestrator/commands.h"
#include "orchestrator/orchestrator.h"
#include "orchestrator/prepare_steps.h"
#include "orchestrator/run_options.h"
#include "orchestrator/signals.h"
#include "orchestrator/summary_table.h"
#include "orchestrator/worker_loop.h"

namespace scalebench {
namespace {

/// The results store as the orchestrator's sink (every call durable on return).
class StoreSink : public ResultSink {
 public:
  explicit StoreSink(ResultsStore& store) : store_(store) {}
  void mark_running(const CellSpec& cell, const std::vector<int>& ranks) override {
    store_.mark_running(cell, ranks);
  }
  void mark_skipped(const CellSpec& cell, const std::string& reason) override {
    store_.mark_skipped(cell, reason);
  }
  void complete(const CellSpec& cell, const std::vector<RankResult>& results) override {
    store_.complete_cell(cell, results);
  }
  void finish_without_results(const CellSpec& cell, CellStatus status, const std::string& phase,
                              const std::string& reason) override {
    store_.finish_cell_without_results(cell, status, phase, reason);
  }

 private:
  ResultsStore& store_;
};

/// Rank 0's state after the input checks: what to run and where to write.
struct Prepared {
  ExpandedMatrix matrix;
  std::map<std::string, ResolvedBranch> branches;  ///< by ref; empty without repo
  std::vector<CellSpec> to_run;
  size_t already_done = 0;
  SchedulingMode scheduling = SchedulingMode::kExclusive;
  std::optional<ResultsStore> store;
};

nlohmann::json devices_json(const std::vector<WorkerHello>& hellos) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& h : hellos) {
    devices.push_back({{"rank", h.world_rank}, {"host", h.host}, {"device", h.device}});
  }
  return devices;
}

Provenance make_provenance(const RunOptions& options, const ExpandedMatrix& matrix,
                           const std::vector<WorkerHello>& hellos, const WorkerFactory& worker) {
  std::vector<std::string> ids;
  for (const auto& cell : matrix.cells) ids.push_back(cell.cell_id);
  Provenance provenance = collect_provenance(options.argv, options.matrix_path.string(),
                                             matrix.text, ids, world_size());
  if (worker.library_versions) {
    const auto versions = worker.library_versions();
    auto get = [&](const char* key) {
      const auto it = versions.find(key);
      return it == versions.end() ? std::string() : it->second;
    };
    provenance.torch_version = get("torch");
    provenance.cuda_version = get("cuda");
    provenance.nccl_version = get("nccl");
  }
  std::set<std::string> hosts{hostname()};
  for (const auto& h : hellos) hosts.insert(h.host);
  provenance.hosts.assign(hosts.begin(), hosts.end());
  provenance.devices = devices_json(hellos).dump();
  return provenance;
}

/// Loads the matrix, opens or creates the results file and selects the cells to run.
/// Throws InputError for bad input (nothing has run yet).
Prepared prepare(const RunOptions& options, const std::vector<WorkerHello>& hellos,
                 const WorkerFactory& worker) {
  Prepared prepared;
  prepared.matrix = load_matrix(options.matrix_path);
  for (const auto& warning : prepared.matrix.warnings) SB_LOG(warning) << warning;
  // Before any cell id is used (matrix hash, provenance, resume): ids include the commit.
  prepared.branches = checkout_matrix_branches(
      prepared.matrix,
      options.work_dir.empty() ? default_work_dir(options.output_path) : options.work_dir);
  apply_commits(prepared.matrix, commits_of(prepared.branches));
  for (const auto& w : resolve_tree_experiments(prepared.matrix, commits_of(prepared.branches)))
    SB_LOG(warning) << w;
  const auto matrix_mode = parse_scheduling_mode(prepared.matrix.scheduling);
  prepared.scheduling =
      options.scheduling.value_or(matrix_mode.value_or(SchedulingMode::kExclusive));
  const auto& cells = prepared.matrix.cells;
  if (options.resume && std::filesystem::exists(options.output_path)) {
    std::vector<std::string> ids;
    ids.reserve(cells.size());
    for (const auto& cell : cells) ids.push_back(cell.cell_id);
    prepared.store.emplace(ResultsStore::open_for_resume(options.output_path, matrix_hash(ids)));
    const auto stored = prepared.store->cells();
    for (const auto& cell : cells) {
      const auto it = stored.find(cell.cell_id);
      const auto status = it == stored.end() ? std::nullopt : std::optional(it->second.status);
      if (should_run_on_resume(status, options.retry_failed)) {
        prepared.to_run.push_back(cell);
      } else {
        ++prepared.already_done;
      }
    }
    SB_LOG(info) << "resuming " << options.output_path.string() << ": " << prepared.already_done
                 << " of " << cells.size() << " cells already final, " << prepared.to_run.size()
                 << " to run";
  } else {
    const Provenance provenance = make_provenance(options, prepared.matrix, hellos, worker);
    prepared.store.emplace(ResultsStore::create(options.output_path, provenance, options.force));
    prepared.to_run = cells;
  }
  std::map<std::string, CommitInfo> commit_info;
  for (const auto& [ref, branch] : prepared.branches) {
    commit_info[branch.commit] = {branch.commit_date_iso, branch.dirty};
    SB_LOG(info) << "branch " << ref << " = " << branch.commit << " (" << branch.commit_date_iso
                 << (branch.dirty ? ", repo checkout dirty" : "") << ") in "
                 << branch.worktree.string();
  }
  prepared.store->set_commit_info(std::move(commit_info));
  return prepared;
}

std::map<std::string, std::filesystem::path> worktrees_of(
    const std::map<std::string, ResolvedBranch>& branches) {
  std::map<std::string, std::filesystem::path> worktrees;
  for (const auto& [ref, branch] : branches) worktrees.emplace(ref, branch.worktree);
  return worktrees;
}

/// The exit status from the file's final state of the matrix's cells.
int final_exit_status(const Prepared& prepared, const OrchestratorOutcome& outcome) {
  const auto stored = prepared.store->cells();
  bool unfinished = false;
  bool failed = false;
  for (const auto& cell : prepared.matrix.cells) {
    const auto it = stored.find(cell.cell_id);
    if (it == stored.end() || it->second.status == CellStatus::kRunning ||
        it->second.status == CellStatus::kInterrupted) {
      unfinished = true;
    } else if (it->second.status != CellStatus::kOk) {
      failed = true;
    }
  }
  if (outcome.interrupted && unfinished) return kExitInterrupted;
  if (failed || unfinished) return kExitCellsFailed;
  return kExitOk;
}

int broadcast_status(int status) {
  MPI_CHECK(MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD));
  return status;
}

[[noreturn]] void abort_job(const std::string& message, int status) {
  SB_LOG(fatal) << message;
  std::cerr << "scalebench: " << message << " (exit status " << status << ")" << std::endl;
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);
}

LogOptions log_options(const RunOptions& options, int rank, bool with_files) {
  LogOptions log;
  log.verbosity = options.verbosity;
  log.rank = rank;
  log.console = rank == 0;
  if (with_files) log.log_dir = options.effective_log_dir();
  return log;
}

int run_worker(const RunOptions& options, const WorkerFactory& worker,
               const WorkerContext& context) {
  const IgnoreStopSignals ignore_signals;  // See Note [Stop signals]
  try {
    const auto runner = worker.make_runner();
    send_hello(context, *runner);
    if (const int go = broadcast_status(0); go != kExitOk) return go;
    init_logging(log_options(options, context.world_rank, true));
    run_worker_loop(*runner, context);
  } catch (const Error& e) {
    abort_job("worker rank " + std::to_string(context.world_rank) + ": " + e.what(),
              kExitInfrastructure);
  }
  return broadcast_status(0);
}

int run_orchestrator_rank(const RunOptions& options, const WorkerFactory& worker) {
  const StopSignalHandler signals;  // See Note [Stop signals]
  const auto hellos = collect_hellos(world_size());
  Prepared prepared;
  int go = kExitOk;
  try {
    prepared = prepare(options, hellos, worker);
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    go = kExitBadInput;
  } catch (const Error& e) {
    std::cerr << "scalebench: " << e.what() << "\n";
    go = kExitInfrastructure;
  }
  if (broadcast_status(go) != kExitOk) return go;
  init_logging(log_options(options, 0, true));
  SB_LOG(info) << "scalebench run: " << prepared.to_run.size() << " cells on " << hellos.size()
               << " workers, scheduling " << to_string(prepared.scheduling) << ", results "
               << options.output_path.string();
  OrchestratorOptions orchestration;
  orchestration.scheduling = prepared.scheduling;
  orchestration.fail_fast = options.fail_fast;
  orchestration.watchdog_grace_s = options.watchdog_grace_s;
  orchestration.already_done = prepared.already_done;
  orchestration.total_cells = prepared.matrix.cells.size();
  StoreSink sink(*prepared.store);
  CellInputs inputs(std::filesystem::absolute(options.matrix_path).parent_path(),
                    worktrees_of(prepared.branches));
  orchestration.attach_inputs = [&inputs](const CellSpec& cell, Assignment& assignment) {
    inputs.attach(cell, assignment);
  };
  OrchestratorOutcome outcome;
  int status = kExitOk;
  try {
    auto steps = run_prepare_steps(prepared.matrix, prepared.branches, std::move(prepared.to_run),
                                   options.effective_log_dir(), sink);
    prepared.to_run = std::move(steps.to_run);
    orchestration.already_done += steps.failed_cells;
    if (options.fail_fast && steps.failed_cells > 0) {
      SB_LOG(warning) << "--fail-fast: a prepare step failed; no cell is started";
      prepared.to_run.clear();
    }
    outcome = run_orchestrator(prepared.to_run, hellos, sink, orchestration);
    if (outcome.abort_message) abort_job(*outcome.abort_message, outcome.abort_status);
    shutdown_workers(world_size());
    prepared.store->set_end_time(iso8601_utc_now());
    status = final_exit_status(prepared, outcome);
    std::cout << format_summary_table(summary_rows(read_results_overview(options.output_path)))
              << std::flush;
  } catch (const Error& e) {
    abort_job(std::string("results or MPI failure on rank 0: ") + e.what(), kExitInfrastructure);
  }
  if (status == kExitInterrupted) {
    SB_LOG(warning) << "interrupted: " << outcome.not_started
                    << " cell(s) not started; rerun with --resume to finish";
  }
  return broadcast_status(status);
}

int run_command(const RunOptions& options, const WorkerFactory& worker) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  std::optional<MpiRuntime> mpi;
  if (initialized == 0) mpi.emplace(nullptr, nullptr);
  const int rank = world_rank();
  init_logging(log_options(options, rank, false));
  if (world_size() < 2) {
    throw InputError(
        "scalebench run needs at least 2 MPI ranks (rank 0 orchestrates, the others run "
        "cells): start it as `mpirun -np <workers+1> scalebench run ...`");
  }
  if (!worker.make_runner) {
    throw FatalError("this scalebench build has no worker (built without LibTorch)");
  }
  const WorkerContext context = discover_worker_context();
  return rank == 0 ? run_orchestrator_rank(options, worker) : run_worker(options, worker, context);
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_status, const WorkerFactory& worker,
                     const std::vector<std::string>& argv) {
  auto* command = app.add_subcommand(
      "run", "Run every cell of a matrix under mpirun/srun (rank 0 orchestrates)");
  auto options = std::make_shared<RunOptions>();
  options->argv = argv;
  auto scheduling = std::make_shared<std::string>();
  auto verbose = std::make_shared<bool>(false);
  auto quiet = std::make_shared<bool>(false);
  command->add_option("matrix", options->matrix_path, "Matrix file (.yaml, .yml or .csv)")
      ->required();
  command->add_option("-o,--output", options->output_path, "Results file (HDF5)")->required();
  command->add_flag("--force", options->force, "Overwrite an existing results file");
  command->add_flag("--resume", options->resume,
                    "Continue an existing results file (created if absent): skip finished "
                    "cells, re-run running/interrupted ones");
  command->add_flag("--retry-failed", options->retry_failed,
                    "With --resume: also re-run failed, oom and timeout cells");
  command->add_flag("--fail-fast", options->fail_fast,
                    "Start no further cell after the first failed/oom/timeout cell");
  command->add_option("--scheduling", *scheduling, "exclusive or packed (overrides the matrix)")
      ->check(CLI::IsMember({"exclusive", "packed"}));
  command->add_option("--log-dir", options->log_dir,
                      "Directory of the per-rank log files (default <output>.logs)");
  command->add_option("--work-dir", options->work_dir,
                      "Directory of the branches' git worktrees (default <output>.work)");
  command
      ->add_option("--watchdog-grace", options->watchdog_grace_s,
                   "Seconds past a cell's timeout_s before rank 0 declares it hung")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  auto* verbose_flag = command->add_flag("-v,--verbose", *verbose, "Debug output on the console");
  command->add_flag("-q,--quiet", *quiet, "Only warnings and errors on the console")
      ->excludes(verbose_flag);
  command->callback([options, scheduling, verbose, quiet, &exit_status, worker] {
    if (!scheduling->empty()) options->scheduling = parse_scheduling_mode(*scheduling);
    options->verbosity =
        *verbose ? Verbosity::kVerbose : (*quiet ? Verbosity::kQuiet : Verbosity::kNormal);
    if (options->resume && options->force) {
      throw InputError("--resume and --force contradict each other: --resume continues " +
                       options->output_path.string() + ", --force replaces it; pass one");
    }
    exit_status = run_command(*options, worker);
  });
}

}  // namespace scalebench
