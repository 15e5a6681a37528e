// scalebench-supervisor: starts a program cell's program and ends everything it started
// with the program or with the worker rank that started it (Note [Program supervisor] in
// supervisor.cc). Started by Subprocess (SubprocessOptions::supervisor), not by users.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/base/supervisor.h"

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> args(argv, argv + argc);
    return scalebench::supervisor::run(scalebench::supervisor::parse_arguments(args));
  } catch (const std::exception& e) {
    std::fprintf(
        stderr,
        "scalebench-supervisor: %s\nusage: scalebench-supervisor --parent PID "
        "--status-fd FD --grace S [--cleanup DIR] [--cgroup auto|off] -- PROGRAM ARGS...\n",
        e.what());
    return 127;
  }
}
