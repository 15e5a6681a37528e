#include "worker/cpu_threads.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <mutex>

namespace scalebench {

int threads_per_worker(int node_cores, int local_workers) {
  return std::max(1, node_cores / std::max(1, local_workers));
}

int configure_cpu_threads(int node_cores, int local_workers, int64_t requested) {
  const int threads =
      requested > 0 ? static_cast<int>(requested) : threads_per_worker(node_cores, local_workers);
  at::set_num_threads(threads);
  static std::once_flag interop_once;
  std::call_once(interop_once, [threads] {
    try {
      at::set_num_interop_threads(threads);
    } catch (const c10::Error&) {
      // Inter-op work already ran in this process (e.g. a test); the pool keeps its size.
    }
  });
  return threads;
}

}  // namespace scalebench
