#include "orchestrator/cli.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <new>

#include "common/base/build_info.h"
#include "common/base/error.h"
#include "orchestrator/commands.h"
#include "orchestrator/run_options.h"

namespace scalebench {

int run_cli(int argc, char** argv, const WorkerFactory& worker) {
  CLI::App app{"scalebench: benchmark DL training and inference across branches and GPUs"};
  app.set_version_flag("--version", std::string(build_info::kVersion));
  app.require_subcommand(1);
  int exit_status = kExitOk;
  add_validate_command(app, exit_status, worker);
  add_schema_command(app, exit_status);
  add_plan_command(app, exit_status);
  add_submit_command(app, exit_status);
  add_run_command(app, exit_status, worker, std::vector<std::string>(argv, argv + argc));
  add_info_command(app, exit_status);
  add_probe_command(app, exit_status, worker);
  add_selftest_command(app, exit_status, worker);
  add_analyze_commands(app, exit_status);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitBadInput;
  } catch (...) {
    return report_error(std::current_exception(), std::cerr);
  }
  return exit_status;
}

int report_error(const std::exception_ptr& error, std::ostream& out) {
  try {
    std::rethrow_exception(error);
  } catch (const InputError& e) {
    out << e.what() << "\n";
    return kExitBadInput;
  } catch (const Error& e) {
    out << "scalebench: " << e.what() << "\n";
    return kExitInfrastructure;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be created or read (permissions, a file where a
    // folder is needed): the path and the OS's reason say what to change.
    out << "scalebench: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    out << "scalebench: out of memory\n";
    return kExitInfrastructure;
  } catch (const std::exception& e) {
    out << "scalebench: internal error: " << e.what()
        << "; please report it with the command line\n";
    return kExitInfrastructure;
  } catch (...) {
    out << "scalebench: internal error: an unknown exception; please report it with the "
           "command line\n";
    return kExitInfrastructure;
  }
}

}  // namespace scalebench
