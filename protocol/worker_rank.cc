#include "protocol/worker_rank.h"

#include <string>

#include "common/base/error.h"
#include "common/base/exit_status.h"
#include "protocol/fault_injection.h"
#include "protocol/job_control.h"
#include "protocol/signals.h"
#include "protocol/worker_loop.h"

namespace scalebench {

int run_worker_rank(const WorkerFactory& worker, const WorkerContext& context,
                    const LogOptions& log) {
  const IgnoreStopSignals ignore_signals;  // See Note [Stop signals]
  try {
    const auto runner = worker.make_runner();
    fault_point("hello", context.world_rank);  // Note [Fault injection]
    send_hello(context, *runner);
    if (const int go = broadcast_status(kExitOk); go != kExitOk) return go;
    init_logging(log);
    run_worker_loop(*runner, context);
  } catch (const Error& e) {
    abort_job("worker rank " + std::to_string(context.world_rank) + ": " + e.what(),
              kExitInfrastructure);
  }
  return broadcast_status(kExitOk);
}

}  // namespace scalebench
