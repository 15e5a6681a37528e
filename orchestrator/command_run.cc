// `scalebench run <matrix> -o results.h5` under mpirun/srun: the command line, and the
// dispatch of each rank to its main (rank 0: orchestrator/orchestrator_rank.h; ranks 1..N:
// protocol/worker_rank.h). See Note [Orchestrator protocol] and docs/user-guide.md.
#include <memory>
#include <optional>

#include "common/base/error.h"
#include "common/base/escaped_text.h"
#include "common/base/logging.h"
#include "orchestrator/commands.h"
#include "orchestrator/orchestrator_rank.h"
#include "orchestrator/run_options.h"
#include "protocol/mpi_comm.h"
#include "protocol/worker_loop.h"
#include "protocol/worker_rank.h"

namespace scalebench {
namespace {

/// A worker rank's log: its own file under the log dir, no console.
LogOptions worker_log_options(const RunOptions& options, int rank) {
  LogOptions log;
  log.verbosity = options.verbosity;
  log.rank = rank;
  log.console = false;
  log.log_dir = options.effective_log_dir();
  return log;
}

int run_command(const RunOptions& options, const WorkerFactory& worker) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  std::optional<MpiRuntime> mpi;
  if (initialized == 0) mpi.emplace(nullptr, nullptr);
  const int rank = world_rank();
  LogOptions startup_log;  // until rank 0 says go: console on rank 0 only, no files
  startup_log.verbosity = options.verbosity;
  startup_log.rank = rank;
  startup_log.console = rank == 0;
  init_logging(startup_log);
  if (world_size() < 2) {
    throw InputError(
        "scalebench run needs at least 2 MPI ranks (rank 0 orchestrates, the others run "
        "cells): start it as `mpirun -np <workers+1> scalebench run ...`");
  }
  if (!worker.make_runner) {
    throw FatalError("this scalebench build has no worker (built without LibTorch)");
  }
  WorkerContext context = discover_worker_context();
  // Note [Worker deadline]: a worker outlives rank 0's own limits by at most this.
  context.overrun_limit_s =
      options.watchdog_grace_s + options.hang_limit_s + kWorkerDeadlineMarginS;
  return rank == 0 ? run_orchestrator_rank(options, worker)
                   : run_worker_rank(worker, context, worker_log_options(options, rank));
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
  auto no_preflight = std::make_shared<bool>(false);
  command->add_flag("--no-preflight", *no_preflight,
                    "Do not check each program configuration (preflight: hydra or a command "
                    "of your own) before the first cell");
  command->add_option("--scheduling", *scheduling, "exclusive or packed (overrides the matrix)")
      ->check(CLI::IsMember({"exclusive", "packed"}));
  command->add_option("--order-seed", options->order_seed,
                      "Seed of the shuffled order of interleaved repetitions (default: derived "
                      "from the matrix, the same on every run)");
  command->add_option("--log-dir", options->log_dir,
                      "Directory of the per-rank log files (default <output>.logs)");
  command->add_option("--work-dir", options->work_dir,
                      "Directory of the branches' git worktrees (default <output>.work)");
  command
      ->add_option("--watchdog-grace", options->watchdog_grace_s,
                   "Seconds past a cell's timeout_s before rank 0 declares it hung")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      ->add_option("--hang-limit", options->hang_limit_s,
                   "Seconds past a timed-out cell's watchdog deadline to wait for its ranks "
                   "(still computing) before declaring them hung and ending the job")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  auto* verbose_flag = command->add_flag("-v,--verbose", *verbose, "Debug output on the console");
  command->add_flag("-q,--quiet", *quiet, "Only warnings and errors on the console")
      ->excludes(verbose_flag);
  command->callback([options, scheduling, no_preflight, verbose, quiet, &exit_status, worker] {
    if (!scheduling->empty()) options->scheduling = parse_scheduling_mode(*scheduling);
    options->preflight = !*no_preflight;
    options->verbosity =
        *verbose ? Verbosity::kVerbose : (*quiet ? Verbosity::kQuiet : Verbosity::kNormal);
    if (options->resume && options->force) {
      throw InputError("--resume and --force contradict each other: --resume continues " +
                       escaped(options->output_path) + ", --force replaces it; pass one");
    }
    if (options->retry_failed && !options->resume) {
      throw InputError(
          "--retry-failed only works with --resume (it re-runs the failed, oom and timeout "
          "cells of an existing results file); add --resume");
    }
    exit_status = run_command(*options, worker);
  });
}

}  // namespace scalebench
