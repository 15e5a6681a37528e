// This rank's place in a program cell's group as torchrun would give it (Note [Program
// cells]): the RANK / LOCAL_RANK / NODE_RANK / MASTER_ADDR / MASTER_PORT a launched program sees.
#pragma once

#include <mpi.h>

#include <string>

namespace scalebench::program {

/// This rank's place in the group as torchrun would give it: a node is a distinct host, in
/// group-rank order; the master is group rank 0's host at a port it found free.
struct TorchrunLayout {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 0;
  int node_rank = 0;
  int nodes = 1;
  std::string master_addr;
  int master_port = 0;  ///< 0: group rank 0 found no free port
};

/// The layout of this rank in `group`, `host` being this rank's host. Collective over `group`
/// (an allgather of the hosts, a broadcast of the port group rank 0 found free).
TorchrunLayout torchrun_layout(const std::string& host, MPI_Comm group);

}  // namespace scalebench::program
