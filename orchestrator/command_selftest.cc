// `scalebench selftest`: the checks of Note [Self-test checks] (worker/self_test.cc) on this
// allocation; rank 0 prints one line per check. docs/selftest.md.
#include <mpi.h>

#include <algorithm>
#include <iostream>
#include <vector>

#include "common/base/error.h"
#include "orchestrator/commands.h"
#include "orchestrator/worker_job.h"
#include "protocol/mpi_comm.h"

namespace scalebench {
namespace {

int self_test_command(const WorkerFactory& worker) {
  if (!worker.make_self_test) {
    throw FatalError("this scalebench build has no worker (built without LibTorch)");
  }
  return run_worker_job(
      "selftest", "`mpirun -np <workers+1> scalebench selftest` (3 or more for the DDP check)",
      [&](MPI_Comm workers, const WorkerContext& context) {
        return to_json_text(worker.make_self_test()->run(workers, context));
      },
      [&](bool worked, const std::string& text) {
        const auto checks = worked ? self_test_checks_from_json_text(text)
                                   : std::vector<SelfTestCheck>{{"worker", "fail", text}};
        const int workers = world_size() - 1;
        std::cout << "scalebench selftest: " << workers << " worker rank"
                  << (workers == 1 ? "" : "s") << "\n"
                  << format_self_test(checks) << std::flush;
        const bool failed = std::any_of(checks.begin(), checks.end(),
                                        [](const SelfTestCheck& c) { return c.status == "fail"; });
        return failed ? kExitCellsFailed : kExitOk;
      });
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
