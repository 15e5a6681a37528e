// The scalebench front door (CLI11): parses argv and dispatches to a command.
#pragma once

#include <exception>
#include <ostream>

#include "protocol/worker_factory.h"

namespace scalebench {

/// Runs the command named in argv; returns the process exit status (see "Exit status" in
/// docs/user-guide.md).
/// `worker` provides the CellRunner for `run` (main.cc passes the LibTorch one; without
/// it `run` fails with status 4).
int run_cli(int argc, char** argv, const WorkerFactory& worker = {});

/// The top-level handler of every command: prints the one line for the exception `error`
/// to `out` and returns its exit status (common/base/exit_status.h): InputError and a
/// filesystem error on a path the user gave -> kExitBadInput; any other scalebench Error,
/// bad_alloc or unexpected exception -> kExitInfrastructure. Never throws.
int report_error(const std::exception_ptr& error, std::ostream& out);

}  // namespace scalebench
