// `scalebench selftest`: the checks of Note [Self-test checks] (worker/self_test.cc) on this
// allocation; rank 0 prints one line per check. docs/selftest.md.
#include <mpi.h>

#include <iostream>
#include <memory>
#include <optional>

#include "common/error.h"
#include "common/logging.h"
#include "common/mpi_comm.h"
#include "orchestrator/commands.h"
#include "protocol/worker_loop.h"

namespace scalebench {
namespace {

constexpr int kChecksTag = 7302;

int self_test_command(const WorkerFactory& worker) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  std::optional<MpiRuntime> mpi;
  if (initialized == 0) mpi.emplace(nullptr, nullptr);
  const int rank = world_rank();
  LogOptions log;
  log.rank = rank;
  log.console = rank == 0;
  init_logging(log);
  if (world_size() < 2) {
    throw InputError(
        "scalebench selftest needs at least 2 MPI ranks (rank 0 reports, the others are "
        "checked), 3 or more for the DDP check: `mpirun -np <workers+1> scalebench selftest`");
  }
  if (!worker.make_self_test) {
    throw FatalError("this scalebench build has no worker (built without LibTorch)");
  }
  const WorkerContext context = discover_worker_context();
  MPI_Comm split = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 0, rank, &split));
  const Communicator workers(split);
  int status = kExitOk;
  if (rank != 0) {
    std::string text;
    try {
      text = to_json_text(worker.make_self_test()->run(workers.get(), context));
    } catch (const std::exception& error) {
      text = to_json_text(std::vector<SelfTestCheck>{{"worker", "fail", error.what()}});
    }
    if (workers.rank() == 0) {
      const int length = static_cast<int>(text.size());
      MPI_CHECK(MPI_Send(&length, 1, MPI_INT, 0, kChecksTag, MPI_COMM_WORLD));
      MPI_CHECK(MPI_Send(text.data(), length, MPI_CHAR, 0, kChecksTag, MPI_COMM_WORLD));
    }
  } else {
    int length = 0;
    MPI_CHECK(MPI_Recv(&length, 1, MPI_INT, 1, kChecksTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    std::string text(static_cast<size_t>(length), '\0');
    MPI_CHECK(
        MPI_Recv(text.data(), length, MPI_CHAR, 1, kChecksTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    const auto checks = self_test_checks_from_json_text(text);
    std::cout << "scalebench selftest: " << world_size() - 1 << " worker rank"
              << (world_size() == 2 ? "" : "s") << "\n"
              << format_self_test(checks) << std::flush;
    for (const auto& check : checks) {
      if (check.status == "fail") status = kExitCellsFailed;
    }
  }
  MPI_CHECK(MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD));
  return status;
}

}  // namespace

void add_selftest_command(CLI::App& app, int& exit_status, const WorkerFactory& worker) {
  auto* command = app.add_subcommand(
      "selftest",
      "Check this allocation before trusting its numbers: devices, exact collectives, DDP "
      "equals one process, timers, GPU memory statistics and out-of-memory recovery (under "
      "mpirun/srun; exit 0 when nothing failed)");
  command->callback([&exit_status, &worker] { exit_status = self_test_command(worker); });
}

}  // namespace scalebench
