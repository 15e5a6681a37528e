// Registration of the `scalebench` subcommands. Each add_*_command lives in its own
// command_*.cc, adds its subcommand to `app` and, when the subcommand runs, stores the
// process exit status in `exit_status`, one of common/base/exit_status.h.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "common/base/exit_status.h"
#include "protocol/worker_factory.h"

namespace scalebench {

void add_validate_command(CLI::App& app, int& exit_status, const WorkerFactory& worker);
void add_schema_command(CLI::App& app, int& exit_status);
void add_plan_command(CLI::App& app, int& exit_status);
void add_submit_command(CLI::App& app, int& exit_status);
/// `run`: `worker` makes each worker rank's CellRunner; `argv` is recorded as provenance.
void add_run_command(CLI::App& app, int& exit_status, const WorkerFactory& worker,
                     const std::vector<std::string>& argv);
void add_info_command(CLI::App& app, int& exit_status);
/// `probe`: `worker` makes each worker rank's CollectiveProbe.
void add_probe_command(CLI::App& app, int& exit_status, const WorkerFactory& worker);
/// `selftest`: `worker` makes each worker rank's SelfTest.
void add_selftest_command(CLI::App& app, int& exit_status, const WorkerFactory& worker);
/// `analyze`, `compare`, `report`, `trace`, `watch`, `history`: forward all their arguments to
/// `<python> -m scalebench_analysis <command> ...` and store its exit status.
void add_analyze_commands(CLI::App& app, int& exit_status);

}  // namespace scalebench
