// CPU thread pools of a worker rank: the node's cores shared among its worker ranks.
#pragma once

#include <cstdint>

namespace scalebench {

/// Intra-op threads per worker rank: max(1, node_cores / local_workers).
int threads_per_worker(int node_cores, int local_workers);

/// Sets at::set_num_threads for this cell: `requested` (the cell's cpu_threads) when > 0,
/// else threads_per_worker(node_cores, local_workers) (cpu_threads: auto); and the inter-op
/// pool to the same size the first time it is called in the process (Torch allows that only
/// once, before any inter-op work). Returns the intra-op thread count. Not thread safe.
int configure_cpu_threads(int node_cores, int local_workers, int64_t requested = 0);

}  // namespace scalebench
