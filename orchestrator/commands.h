// Registration of the `scalebench` subcommands. Each add_*_command lives in its own
// command_*.cc, adds its subcommand to `app` and, when the subcommand runs, stores the
// process exit status in `exit_status`. Exit statuses (docs/user-guide.md#exit-status):
//   0 all ok · 1 some cells failed / regression found · 2 bad input · 3 interrupted,
//   resumable · 4 infrastructure failure.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace scalebench {

struct WorkerFactory;  // orchestrator/run_options.h

inline constexpr int kExitOk = 0;
inline constexpr int kExitCellsFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInterrupted = 3;
inline constexpr int kExitInfrastructure = 4;

void add_validate_command(CLI::App& app, int& exit_status);
void add_plan_command(CLI::App& app, int& exit_status);
void add_submit_command(CLI::App& app, int& exit_status);
/// `run`: `worker` makes each worker rank's CellRunner; `argv` is recorded as provenance.
void add_run_command(CLI::App& app, int& exit_status, const WorkerFactory& worker,
                     const std::vector<std::string>& argv);
void add_info_command(CLI::App& app, int& exit_status);
/// `analyze`, `compare`, `report`: forward all their arguments to
/// `<python> -m scalebench_analysis <command> ...` and store its exit status.
void add_analyze_commands(CLI::App& app, int& exit_status);

}  // namespace scalebench
