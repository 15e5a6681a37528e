#include "program/program_attempt.h"

#include <chrono>
#include <stdexcept>
#include <system_error>

#include "common/base/logging.h"
#include "program/folder_sweep.h"
#include "program/launch_environment.h"
#include "protocol/mpi_check.h"

namespace scalebench::program {

namespace {

double steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double epoch_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

/// Launches `assignment`'s program (its cell's batch and iterations) on every rank of the
/// group and waits for all of them: a rank whose program fails makes the others end theirs
/// (Note [Program cells]). Collective over `group`.
Attempt attempt_program(const Assignment& assignment, const TorchrunLayout& layout,
                        const WorkerContext& context, const std::string& device,
                        const std::filesystem::path& output_dir, double budget_bytes,
                        double timeout_s, MPI_Comm group) {
  Attempt attempt;
  // Note [Program folder sweep]: the folders of this node's dead workers go first.
  for (const auto& name : sweep_stale_cell_folders(output_dir.parent_path().parent_path())) {
    SB_LOG(info) << "removed " << name << ": the folder of a program cell whose worker died";
  }
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
      const CellSpec& cell = assignment.cell;  // Note [Program record bounds], [Program profiles]
      attempt.run = run_and_read(
          options, group, timeout_s, rss_budget,
          step_limit(cell.warmup_iterations, cell.measured_iterations + cell.profile_steps));
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

}  // namespace scalebench::program
