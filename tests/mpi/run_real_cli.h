// `scalebench run <args...>` in-process with the real LibTorch CellRunner, for MPI tests that
// drive the whole command path, and the broadcast of rank 0's scratch folder. Every rank
// calls both.
#pragma once

#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

#include "orchestrator/cli.h"
#include "worker/collective_probe.h"
#include "worker/self_test.h"
#include "worker/torch_cell_runner.h"
#include "worker/versions.h"

namespace scalebench::testing_real {

/// Returns the exit status `scalebench <args...>` would give (args[0] is the command).
inline int run_real_scalebench(std::vector<std::string> args) {
  args.insert(args.begin(), "scalebench");
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (auto& arg : args) argv.push_back(arg.data());
  const WorkerFactory worker{make_torch_cell_runner, library_versions, make_collective_probe,
                             make_self_test};
  return run_cli(static_cast<int>(argv.size()), argv.data(), worker);
}

/// Returns the exit status `scalebench run <args...>` would give.
inline int run_real_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "run");
  return run_real_scalebench(std::move(args));
}

/// Rank 0's `text` on every rank of MPI_COMM_WORLD (e.g. the path of its temporary folder).
inline std::string broadcast_from_rank0(std::string text) {
  int size = static_cast<int>(text.size());
  MPI_Bcast(&size, 1, MPI_INT, 0, MPI_COMM_WORLD);
  text.resize(static_cast<size_t>(size));
  MPI_Bcast(text.data(), size, MPI_CHAR, 0, MPI_COMM_WORLD);
  return text;
}

}  // namespace scalebench::testing_real
