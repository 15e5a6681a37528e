// The scalebench front door (CLI11): parses argv and dispatches to a command.
#pragma once

#include "protocol/worker_factory.h"

namespace scalebench {

/// Runs the command named in argv; returns the process exit status (see "Exit status" in
/// docs/user-guide.md).
/// `worker` provides the CellRunner for `run` (main.cc passes the LibTorch one; without
/// it `run` fails with status 4).
int run_cli(int argc, char** argv, const WorkerFactory& worker = {});

}  // namespace scalebench
