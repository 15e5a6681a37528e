#include "orchestrator/cli.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "common/build_info.h"
#include "common/error.h"
#include "orchestrator/commands.h"
#include "orchestrator/run_options.h"

namespace scalebench {

int run_cli(int argc, char** argv, const WorkerFactory& worker) {
  CLI::App app{"scalebench: benchmark DL training and inference across branches and GPUs"};
  app.set_version_flag("--version", std::string(build_info::kVersion));
  app.require_subcommand(1);
  int exit_status = kExitOk;
  add_validate_command(app, exit_status);
  add_schema_command(app, exit_status);
  add_plan_command(app, exit_status);
  add_submit_command(app, exit_status);
  add_run_command(app, exit_status, worker, std::vector<std::string>(argv, argv + argc));
  add_info_command(app, exit_status);
  add_analyze_commands(app, exit_status);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitBadInput;
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  } catch (const Error& e) {
    std::cerr << "scalebench: " << e.what() << "\n";
    return kExitInfrastructure;
  }
  return exit_status;
}

}  // namespace scalebench
