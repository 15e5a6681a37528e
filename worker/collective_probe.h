// The LibTorch CollectiveProbe (protocol/collective_probe.h): the DDP path's collective
// backends (MPI on CPU, NCCL on GPU) timed over message sizes. See Note [Probe figures].
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "protocol/collective_probe.h"

namespace scalebench {

std::unique_ptr<CollectiveProbe> make_collective_probe();

/// The largest `value` of the ranks of `comm` (MPI_Allreduce MAX); every rank gets it.
double group_max(double value, MPI_Comm comm);

/// `text` of every rank of `comm`, in rank order (MPI_Allgatherv).
std::vector<std::string> allgather_text(MPI_Comm comm, const std::string& text);

}  // namespace scalebench
