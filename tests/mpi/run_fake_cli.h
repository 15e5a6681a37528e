// `scalebench run <args...>` in-process with the fake CellRunner, for MPI tests that drive the
// real command path (matrix loader, HDF5 store) without models. Every rank calls it.
#pragma once

#include <string>
#include <vector>

#include "fake_cell_runner.h"
#include "orchestrator/cli.h"

namespace scalebench::testing_fake {

/// Returns the exit status `scalebench run` would give.
inline int run_fake_cli(std::vector<std::string> args) {
  args.insert(args.begin(), {"scalebench", "run"});
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (auto& arg : args) argv.push_back(arg.data());
  WorkerFactory worker;
  worker.make_runner = make_fake_cell_runner;
  return run_cli(static_cast<int>(argv.size()), argv.data(), worker);
}

}  // namespace scalebench::testing_fake
