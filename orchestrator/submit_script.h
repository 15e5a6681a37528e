// `scalebench submit`: the batch script for Slurm, rendered from slurm/sbatch_template.inc.
//
// Pure functions only (no process, no file access): the command in command_submit.cc
// resolves paths and runs sbatch. Every value that reaches the script is validated here;
// values that become #SBATCH directives must match a strict character set (sbatch parses
// those lines itself), and values that become shell words are single-quoted.
// See Note [Slurm job layout] in submit_script.cc and docs/cluster-guide.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace scalebench {

/// What the user asked `scalebench submit` for. Paths must already be absolute (the job
/// may start in another directory than the submitting shell).
struct SubmitOptions {
  std::filesystem::path scalebench_exe;  ///< the `scalebench` binary the job runs
  std::filesystem::path matrix_path;     ///< matrix file given to `scalebench run`
  std::filesystem::path output_path;     ///< results file (created by the first job)
  int nodes = 1;                         ///< --nodes
  int gpus_per_node = 0;                 ///< --gpus-per-node; 0 = CPU-only workers
  int workers_per_node = 0;              ///< --workers-per-node; only (and required) when G = 0
  std::string partition;                 ///< --partition, "" = the cluster's default
  std::string time_limit;                ///< --time in a Slurm time format, "" = partition default
  std::string account;                   ///< --account, "" = the user's default
  std::string constraint;                ///< --constraint (node features), "" = none
  std::string job_name = "scalebench";   ///< --job-name
  std::optional<std::filesystem::path> setup_file;  ///< sourced by the batch shell before srun
  int signal_lead_s = 300;  ///< USR1 goes to the batch shell this many seconds before the limit
  bool requeue = false;     ///< #SBATCH --requeue, and `scontrol requeue` after exit status 3
};

/// The task layout of a job: see Note [Slurm job layout].
struct SubmitLayout {
  int workers_per_node = 0;  ///< G, or --workers-per-node when G = 0
  int tasks_per_node = 0;    ///< slots asked per node: workers + 1 (rank 0 fits on node 0)
  int total_tasks = 0;       ///< tasks of the job step: nodes * workers_per_node + 1
};

/// Checks every option; throws InputError naming the flag, the value and what to change.
void validate_submit_options(const SubmitOptions& options);

/// The layout for validated options.
SubmitLayout submit_layout(const SubmitOptions& options);

/// The complete batch script (validates first; throws InputError on a bad option).
std::string render_batch_script(const SubmitOptions& options);

/// `word` as one POSIX shell word: single-quoted, a `'` inside becomes `'\''`.
std::string shell_quote(std::string_view word);

/// A Slurm time limit ("minutes", "minutes:seconds", "hours:minutes:seconds",
/// "days-hours", "days-hours:minutes", "days-hours:minutes:seconds") in seconds.
/// Throws InputError for anything else, and for zero (no limit: omit --time instead).
std::int64_t parse_slurm_time_limit_s(std::string_view text);

/// The job id in `sbatch --parsable` output ("<id>" or "<id>;<cluster>", newline ended).
/// Throws Error when the output holds no job id.
std::string parse_sbatch_job_id(std::string_view parsable_output);

}  // namespace scalebench
