// The scalebench front door (CLI11): parses argv and dispatches to a command.
#pragma once

namespace scalebench {

/// Runs the command named in argv; returns the process exit status (see docs/exit-codes).
int run_cli(int argc, char** argv);

}  // namespace scalebench
