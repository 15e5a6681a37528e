#include "program/launch_environment.h"

#include <cstdlib>
#include <vector>

#include "common/cell/program.h"

namespace scalebench::program {

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
  // Note [Program code identity]: the tree whose packages the program should import.
  std::error_code no_cwd;  // absolute() of an already absolute tree needs no working directory
  set("SCALEBENCH_TREE",
      std::filesystem::absolute(assignment.tree, no_cwd).lexically_normal().string());
  set("SCALEBENCH_CELL_ID", cell.cell_id);
  set("SCALEBENCH_WARMUP", std::to_string(cell.warmup_iterations));
  set("SCALEBENCH_ITERATIONS", std::to_string(cell.measured_iterations));
  // Note [Program profiles]: the steps after the measured ones to run under the profiler.
  set("SCALEBENCH_PROFILE_STEPS", std::to_string(cell.profile_steps));
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
  const char* caller_path = std::getenv("PATH");
  if (const auto path = activated_path(cell.program, caller_path ? caller_path : "")) {
    set("PATH", *path);
  }
  options.unset_environment_prefixes = kLauncherEnvironmentPrefixes;
  // The experiment's env comes last: of two entries of one name the later wins (Subprocess),
  // so a user may override a variable of the contract (OMP_NUM_THREADS, ...) on purpose.
  for (const auto& [name, value] : cell.program.env) {
    options.set_environment.emplace_back(name, substitute_placeholders(value, values));
  }
  options.working_dir = std::filesystem::path(assignment.tree);
  // Note [Program supervisor]: the program runs under scalebench-supervisor, which ends it and
  // everything it started when it exits or when this rank dies, and then removes the cell's
  // folder if this rank could not. Without the executable (a partial installation) the
  // program runs as a plain child and the cell records containment "process group".
  if (const auto supervisor = find_supervisor()) {
    options.supervisor = *supervisor;
    options.cleanup_dir = output_dir.parent_path();
  }
  return options;
}

}  // namespace scalebench::program
