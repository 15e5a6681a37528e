#include "program/program_cell.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>

#include "program/cell_folder.h"
#include "program/handed_outputs.h"
#include "program/launch_environment.h"
#include "program/program_attempt.h"
#include "program/program_batch_search.h"
#include "program/program_checks.h"
#include "program/program_profile.h"
#include "program/torchrun_layout.h"

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
using program::Attempt;
using program::attempt_program;
using program::CellFolder;
using program::handed_outputs;
using program::kOutputsFile;
using program::output_tail;
using program::program_budget_bytes;
using program::ProgramRun;
using program::record_report;
using program::search_program_batch;
using program::torchrun_layout;
using program::TorchrunLayout;

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

  // The folder's one owner: gone on every way out, a throw included (issue 41).
  const CellFolder cell_dir(std::filesystem::temp_directory_path(), assignment.cell.cell_id);
  const auto output_dir = cell_dir.path() / ("rank" + std::to_string(layout.rank));
  const double budget_bytes = program_budget_bytes(assignment.cell, device, context);
  Assignment timed = assignment;
  if (assignment.cell.batch_size == kBatchAuto) {  // Note [Program memory budget]
    const int64_t batch = search_program_batch(assignment, layout, context, device, output_dir,
                                               budget_bytes, deadline, group, result);
    if (batch == 0) return result;
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
  // Note [Program steps asked and run], Note [Program code identity], Note [Program profiles]
  record_program_checks(result, run.report, timed.cell);
  record_program_profile(result, run.report, timed.cell);
  return result;
}

namespace {

/// Note [Program cells]: program cells run here; every other cell goes to the built-in runner.
class ProgramAwareRunner : public CellRunner {
 public:
  explicit ProgramAwareRunner(std::unique_ptr<CellRunner> builtin) : builtin_(std::move(builtin)) {}

  std::string device_name(const WorkerContext& context) override {
    return builtin_->device_name(context);
  }

  RankResult run(const Assignment& assignment, MPI_Comm group,
                 const WorkerContext& context) override {
    const CellSpec& cell = assignment.cell;
    if (cell.program.command.empty()) return builtin_->run(assignment, group, context);
    // The user's program owns the device; this rank only launches it. Whether the node has a
    // GPU is the built-in runner's answer (asked once: it creates no context).
    if (!has_gpu_) has_gpu_ = builtin_->device_name(context) != "cpu";
    const bool cuda = cell.device == Device::kCuda || (cell.device == Device::kAuto && *has_gpu_);
    return run_program_cell(assignment, group, context, cuda ? "cuda" : "cpu");
  }

 private:
  std::unique_ptr<CellRunner> builtin_;
  std::optional<bool> has_gpu_;
};

}  // namespace

std::unique_ptr<CellRunner> with_program_cells(std::unique_ptr<CellRunner> builtin) {
  return std::make_unique<ProgramAwareRunner>(std::move(builtin));
}

}  // namespace scalebench
