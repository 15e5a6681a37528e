#include "orchestrator/worker_job.h"

#include <optional>

#include "common/base/error.h"
#include "common/base/exit_status.h"
#include "common/base/logging.h"
#include "protocol/mpi_comm.h"
#include "protocol/worker_loop.h"

namespace scalebench {
namespace {

constexpr int kOutcomeTag = 7301;

void send_outcome(bool worked, const std::string& text) {
  const int header[2] = {worked ? 1 : 0, static_cast<int>(text.size())};
  MPI_CHECK(MPI_Send(header, 2, MPI_INT, 0, kOutcomeTag, MPI_COMM_WORLD));
  MPI_CHECK(MPI_Send(text.data(), header[1], MPI_CHAR, 0, kOutcomeTag, MPI_COMM_WORLD));
}

std::pair<bool, std::string> receive_outcome() {
  int header[2] = {0, 0};
  MPI_CHECK(MPI_Recv(header, 2, MPI_INT, 1, kOutcomeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  std::string text(static_cast<size_t>(header[1]), '\0');
  MPI_CHECK(MPI_Recv(text.data(), header[1], MPI_CHAR, 1, kOutcomeTag, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE));
  return {header[0] == 1, text};
}

}  // namespace

int run_worker_job(const std::string& command, const std::string& usage,
                   const std::function<std::string(MPI_Comm workers, const WorkerContext&)>& work,
                   const std::function<int(bool worked, const std::string& text)>& report) {
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
    throw InputError("scalebench " + command +
                     " needs at least 2 MPI ranks (rank 0 reports, the others are the "
                     "workers): start it as " +
                     usage);
  }
  const WorkerContext context = discover_worker_context();
  MPI_Comm split = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 0, rank, &split));
  const Communicator workers(split);
  int status = kExitOk;
  if (rank != 0) {
    bool worked = true;
    std::string text;
    try {
      text = work(workers.get(), context);
    } catch (const std::exception& error) {
      worked = false;
      text = error.what();
    }
    if (workers.rank() == 0) send_outcome(worked, text);
  } else {
    const auto [worked, text] = receive_outcome();
    status = report(worked, text);
  }
  MPI_CHECK(MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD));
  return status;
}

}  // namespace scalebench
