#include "orchestrator/orchestrator_rank.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include "common/base/error.h"
#include "common/base/exit_status.h"
#include "common/base/logging.h"
#include "common/cell/repetition_stats.h"
#include "orchestrator/adaptive_rounds.h"
#include "orchestrator/analysis_process.h"
#include "orchestrator/cell_inputs.h"
#include "orchestrator/cli.h"
#include "orchestrator/compiled_twins.h"
#include "orchestrator/cross_cell_accuracy.h"
#include "orchestrator/group_commit_sink.h"
#include "orchestrator/orchestrator.h"
#include "orchestrator/prepare_steps.h"
#include "orchestrator/run_preparation.h"
#include "orchestrator/summary_table.h"
#include "protocol/job_control.h"
#include "protocol/mpi_comm.h"
#include "protocol/signals.h"
#include "results/overview.h"
#include "results/reader.h"

namespace scalebench {
namespace {

/// One stage before the cells (the prepare steps, the compile axis' twins) taken: its cells
/// left to run replace `to_run`, its failed cells (recorded by the stage) count as done, and
/// under --fail-fast a failure starts no cell. `what` names a failure of the stage.
template <typename StageOutcome>
void take_stage(StageOutcome& stage, const char* what, bool fail_fast,
                std::vector<CellSpec>& to_run, size_t& already_done) {
  to_run = std::move(stage.to_run);
  already_done += stage.failed_cells;
  if (fail_fast && stage.failed_cells > 0) {
    SB_LOG(warning) << "--fail-fast: " << what << " failed; no cell is started";
    to_run.clear();
  }
}

std::map<std::string, std::filesystem::path> worktrees_of(
    const std::map<std::string, ResolvedBranch>& branches) {
  std::map<std::string, std::filesystem::path> worktrees;
  for (const auto& [ref, branch] : branches) worktrees.emplace(ref, branch.worktree);
  return worktrees;
}

/// The exit status from the file's final state of the matrix's cells.
int final_exit_status(const PreparedRun& prepared, const OrchestratorOutcome& outcome) {
  const auto stored = prepared.store->cells();
  bool unfinished = false;
  bool failed = false;
  for (const auto& cell : prepared.matrix->cells()) {
    const auto it = stored.find(cell.cell_id);
    if (it == stored.end() || it->second.status == CellStatus::kRunning ||
        it->second.status == CellStatus::kInterrupted) {
      unfinished = true;
    } else if (it->second.status == CellStatus::kSkipped && cell.adaptive_repetitions &&
               cell.repetition >= kMinAdaptiveRounds) {
      continue;  // Note [Adaptive repetitions]: a run a decided series did not need
    } else if (it->second.status != CellStatus::kOk) {
      failed = true;
    }
  }
  if (outcome.interrupted && unfinished) return kExitInterrupted;
  if (failed || unfinished) return kExitCellsFailed;
  return kExitOk;
}

/// Before MPI_Abort: commits what the sink holds (Note [Group commit]). A failing commit
/// (often the very failure being reported) is only logged: the abort goes on.
void flush_before_abort(GroupCommitSink& sink) noexcept {
  try {
    sink.flush();
  } catch (const std::exception& e) {
    SB_LOG(debug) << "results not all written before the abort: " << e.what();
  }
}

// Note [The run ends with the answer]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// After its table of cells, `run` prints the analysis' summary (`scalebench analyze FILE
// --summary`: the fastest configuration per experiment, scaling, the recommended batch,
// failures and what to do about untrusted cells), unless --quiet or SCALEBENCH_RUN_SUMMARY=0
// (docs/examples/run_quickstart.sh, which runs `analyze` next; the test suites, through
// their CMake test presets and tests/run_all.sh). Whether a person reads cannot be told
// here: under mpirun a rank's stdout is a pseudo-terminal even when mpirun's output goes to
// a file. It costs the analysis' start-up, a few seconds, once per run. A summary that
// cannot be made (no Python configured, a package missing) is one warning, never a failed
// run.
void print_the_answer(const RunOptions& options) {
  const char* wanted = std::getenv("SCALEBENCH_RUN_SUMMARY");
  if (options.verbosity == Verbosity::kQuiet ||
      (wanted != nullptr && std::string_view(wanted) == "0")) {
    return;
  }
  std::cout << "\n" << std::flush;
  try {
    if (const int status = run_analysis({"analyze", options.output_path, "--summary"});
        status != 0) {
      SB_LOG(warning) << "the summary could not be made (the analysis exited " << status
                      << "); run scalebench analyze " << options.output_path;
    }
  } catch (const Error& e) {
    SB_LOG(warning) << "no summary: " << e.what();
  }
}

/// What export_compiled_twins needs from the run (Note [Compiled twins]). Without a Python
/// only the cells with a twin fail, saying so.
TwinExportContext twin_export_context(const RunOptions& options,
                                      const std::vector<WorkerHello>& hellos,
                                      const WorkerFactory& worker, const CellInputs& inputs) {
  TwinExportContext context;
  context.work_dir = options.effective_work_dir();
  try {
    context.python = python_interpreter();
  } catch (const InputError& e) {
    SB_LOG(debug) << "no Python for compile twins: " << e.what();
  }
  if (worker.library_versions) context.torch_version = worker.library_versions()["torch"];
  context.workers_have_gpu = std::any_of(
      hellos.begin(), hellos.end(), [](const WorkerHello& hello) { return hello.device != "cpu"; });
  context.write_zoo_state = worker.write_zoo_state;
  context.tree_of = [&inputs](const CellSpec& cell) { return inputs.tree_of(cell); };
  return context;
}

LogOptions rank0_log_options(const RunOptions& options) {
  LogOptions log;
  log.verbosity = options.verbosity;
  log.rank = 0;
  log.console = true;
  log.log_dir = options.effective_log_dir();
  return log;
}

}  // namespace

int run_orchestrator_rank(const RunOptions& options, const WorkerFactory& worker) {
  const StopSignalHandler signals;  // See Note [Stop signals]
  std::vector<WorkerHello> hellos;
  try {
    hellos = collect_hellos(world_size(), options.hang_limit_s);
  } catch (const Error& e) {
    abort_job(e.what(), kExitInfrastructure);
  }
  PreparedRun prepared;
  int go = kExitOk;
  try {
    prepared = prepare_run(options, hellos, worker);
    init_logging(rank0_log_options(options));  // before go: a bad log file is bad input
  } catch (...) {  // any exception: the workers wait for go, so rank 0 must not leave here
    go = report_error(std::current_exception(), std::cerr);
  }
  if (broadcast_status(go) != kExitOk) return go;
  const ResolvedMatrix& matrix = *prepared.matrix;
  SB_LOG(info) << "scalebench run: " << prepared.to_run.size() << " cells on " << hellos.size()
               << " workers, scheduling " << to_string(prepared.scheduling) << ", results "
               << options.output_path.string();
  OrchestratorOptions orchestration;
  orchestration.scheduling = prepared.scheduling;
  orchestration.fail_fast = options.fail_fast;
  orchestration.watchdog_grace_s = options.watchdog_grace_s;
  orchestration.hang_limit_s = options.hang_limit_s;
  orchestration.already_done = prepared.already_done;
  orchestration.total_cells = matrix.cells().size();
  GroupCommitSink sink(*prepared.store);  // Note [Group commit]
  CellInputs inputs(std::filesystem::absolute(options.matrix_path).parent_path(),
                    worktrees_of(matrix.branches()));
  orchestration.attach_inputs = [&inputs](const CellSpec& cell, Assignment& assignment) {
    inputs.attach(cell, assignment);
  };
  // Note [Adaptive repetitions]: the analysis looks at the durable file between rounds.
  orchestration.look = [path = options.output_path](int64_t round) {
    return look_at_results(path, round);
  };
  OrchestratorOutcome outcome;
  int status = kExitOk;
  try {
    auto steps = run_prepare_steps(matrix.matrix(), matrix.branches(), std::move(prepared.to_run),
                                   options.effective_log_dir(), sink);
    take_stage(steps, "a prepare step", options.fail_fast, prepared.to_run,
               orchestration.already_done);
    // Note [Compiled twins]: after the prepare steps, which may write a checkpoint.
    auto twins = export_compiled_twins(std::move(prepared.to_run),
                                       twin_export_context(options, hellos, worker, inputs), sink);
    take_stage(twins, "a twin of the compile axis", options.fail_fast, prepared.to_run,
               orchestration.already_done);
    inputs.set_compiled_twins(std::move(twins.twins));
    outcome = run_orchestrator(prepared.to_run, hellos, sink, orchestration);
    if (outcome.abort_message) {
      flush_before_abort(sink);
      abort_job(*outcome.abort_message, outcome.abort_status);
    }
    shutdown_workers(world_size());
    sink.close();  // every record committed; from here rank 0 uses the store directly
    // Note [Accuracy across cells]: every validating program cell whose baseline is stored.
    compare_across_cells(matrix.cells(), matrix.matrix().baseline, *prepared.store);
    // The cells are final: one read serves the series and the table, and the run's last
    // records are one update (each update copies the whole file, Note [Results durability]).
    const auto overview = read_results_overview(options.output_path);
    ResultsStore& store = *prepared.store;
    store.batch([&] {
      // Note [Repetitions]: the series figures from every repetition in the file (earlier
      // runs' included, on --resume).
      store.write_series(series_of_overview(overview));
      store.set_commit_log(commit_log_json(sink.stats()));
      store.set_end_time(iso8601_utc_now());
    });
    status = final_exit_status(prepared, outcome);
    std::cout << format_summary_table(summary_rows(overview))
              << format_mfu(overview, /*achieved_only_rows=*/false) << format_series_table(overview)
              << std::flush;
    print_the_answer(options);
  } catch (const Error& e) {
    flush_before_abort(sink);
    abort_job(std::string("results or MPI failure on rank 0: ") + e.what(), kExitInfrastructure);
  } catch (const std::exception& e) {
    flush_before_abort(sink);
    abort_job(std::string("internal error on rank 0: ") + e.what(), kExitInfrastructure);
  }
  if (status == kExitInterrupted) {
    SB_LOG(warning) << "interrupted: " << outcome.not_started
                    << " cell(s) not started; rerun with --resume to finish";
  }
  return broadcast_status(status);
}

}  // namespace scalebench
