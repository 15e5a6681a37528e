// run_cli in process with std::cout and std::cerr captured: the unit tests of the commands.
#pragma once

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "orchestrator/cli.h"

namespace scalebench::testing {

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

/// `scalebench <args...>` through run_cli, with `worker` (empty: no worker library).
inline CliResult run_captured(std::vector<std::string> args, const WorkerFactory& worker = {}) {
  args.insert(args.begin(), "scalebench");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  std::ostringstream out;
  std::ostringstream err;
  auto* const old_out = std::cout.rdbuf(out.rdbuf());
  auto* const old_err = std::cerr.rdbuf(err.rdbuf());
  CliResult result;
  result.status = run_cli(static_cast<int>(argv.size()), argv.data(), worker);
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  result.out = out.str();
  result.err = err.str();
  return result;
}

}  // namespace scalebench::testing
