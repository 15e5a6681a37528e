// One cell through the real TorchCellRunner on a given group (MPI_COMM_SELF: world size 1;
// MPI_COMM_WORLD: every rank of the test job), for the MPI tests of the worker.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "protocol/mpi_comm.h"
#include "worker/torch_cell_runner.h"

namespace scalebench::testing_real {

/// A worker context for `group`: this rank's world rank, its group rank as local index.
inline WorkerContext context_for(MPI_Comm group) {
  WorkerContext context;
  context.world_rank = world_rank();
  context.host = "test";
  MPI_Comm_rank(group, &context.local_index);
  MPI_Comm_size(group, &context.local_workers);
  context.node_cores = static_cast<int>(std::thread::hardware_concurrency());
  return context;
}

/// The workers' MPI tests' training cell: the zoo mlp on the CPU, SGD with momentum, seed 3;
/// `batch_size` samples a rank, `measured` timed steps after 2 warm-up steps.
inline CellSpec mlp_training_cell(int64_t batch_size, int measured) {
  CellSpec cell;
  cell.experiment = "train-mlp";
  cell.model.zoo = "mlp";
  cell.mode = Mode::kTrain;
  cell.device = Device::kCpu;
  cell.batch_size = batch_size;
  cell.warmup_iterations = 2;
  cell.measured_iterations = measured;
  cell.optimizer = {"sgd", 0.05, 0.9, 0.0};
  cell.seed = 3;
  return cell;
}

/// Runs `cell` with its world size set to the group's size, members 0..size-1.
inline RankResult run_cell(CellSpec cell, MPI_Comm group) {
  MPI_Comm_size(group, &cell.world_size);
  cell = finalize_cell_id(cell);
  std::vector<int> members(static_cast<size_t>(cell.world_size));
  std::iota(members.begin(), members.end(), 0);
  return make_torch_cell_runner()->run(Assignment{cell, members, "", ""}, group,
                                       context_for(group));
}

}  // namespace scalebench::testing_real
