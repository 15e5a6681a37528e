// `scalebench run <args...>` in-process with the real CellRunner (LibTorch and program cells), for
// MPI tests that drive the whole command path, the broadcast of rank 0's scratch folder, and the
// two together: a matrix text run as a user would. Every rank calls each of them.
#pragma once

#include <mpi.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "orchestrator/cli.h"
#include "program/program_cell.h"
#include "worker/aoti_model.h"
#include "worker/collective_probe.h"
#include "worker/compiled_twin.h"
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
  const auto make_runner = [] { return with_program_cells(make_torch_cell_runner()); };
  // As app/main.cc wires it, so that the tests run what a user's scalebench runs.
  const WorkerFactory worker{make_runner,    library_versions, make_collective_probe,
                             make_self_test, aoti_available,   write_zoo_state};
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

/// A matrix run by run_matrix: rank 0's folder (the same path on every rank) and the status.
struct MatrixRun {
  std::filesystem::path root;
  int status = 0;
  [[nodiscard]] std::filesystem::path results() const { return root / "r.h5"; }
  [[nodiscard]] std::filesystem::path logs() const { return root / "logs"; }
};

/// Rank 0 writes `matrix_text` to `<folder>/m.yaml` (`folder` is rank 0's, existing; the other
/// ranks' argument is ignored), then every rank runs
/// `scalebench run <folder>/m.yaml -o <folder>/r.h5 --log-dir <folder>/logs --quiet`.
inline MatrixRun run_matrix(const std::filesystem::path& folder, const std::string& matrix_text) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) std::ofstream(folder / "m.yaml") << matrix_text;
  MatrixRun run;
  run.root = broadcast_from_rank0(folder.string());
  run.status = run_real_cli({(run.root / "m.yaml").string(), "-o", run.results().string(),
                             "--log-dir", run.logs().string(), "--quiet"});
  return run;
}

}  // namespace scalebench::testing_real
