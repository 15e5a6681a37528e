// `scalebench probe`: the collectives of the DDP path timed over message sizes, like
// nccl-tests (docs/probe.md). The Torch-free contract between the command (rank 0 prints
// and stores) and the worker library (the workers time the collectives).
//
// The figures of each row: Note [Probe figures] in common/cell/probe_report.h.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/cell/probe_report.h"
#include "protocol/cell_runner.h"

namespace scalebench {

struct ProbeOptions {
  std::vector<std::string> operations = {"allreduce", "broadcast", "allgather"};
  int64_t min_bytes = 8;
  int64_t max_bytes = 0;  ///< 0: 1 GiB on GPUs, 16 MiB on CPUs
  int64_t factor = 2;     ///< each size is the previous one times this
  int iterations = 20;
  int warmup = 5;
  std::string device = "auto";   ///< auto, cpu or cuda
  std::string backend = "auto";  ///< auto (nccl on GPU, mpi on CPU), mpi or nccl
  int corrupt_rank = -1;  ///< tests only: this group rank perturbs its input before the check
};

class CollectiveProbe {
 public:
  virtual ~CollectiveProbe() = default;
  /// Collective over `workers` (every worker rank calls it); every rank returns the same
  /// report. Throws InputError for unusable options, CellError for a device that is missing.
  virtual ProbeReport run(const ProbeOptions& options, MPI_Comm workers,
                          const WorkerContext& context) = 0;
};

/// The sizes of `options`: min_bytes, min_bytes * factor, ... up to max_bytes (inclusive),
/// each rounded to whole float32 elements; `max_bytes` must already be resolved (> 0).
std::vector<int64_t> probe_sizes(const ProbeOptions& options);

}  // namespace scalebench
