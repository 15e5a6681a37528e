// `batch_size: auto` for a program cell: the program relaunched once per probe under the
// cell's memory budget (Note [Program memory budget]).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include "common/cell/messages.h"
#include "program/torchrun_layout.h"
#include "protocol/cell_runner.h"

namespace scalebench::program {

/// The budget of Note [Program memory budget], bytes (0: none).
double program_budget_bytes(const CellSpec& cell, const std::string& device,
                            const WorkerContext& context);

/// Note [Program memory budget]: the batch search of a program cell. Returns the chosen
/// batch, or 0 with `result` failed (status, phase batch_search, reason). Collective.
int64_t search_program_batch(const Assignment& assignment, const TorchrunLayout& layout,
                             const WorkerContext& context, const std::string& device,
                             const std::filesystem::path& output_dir, double budget_bytes,
                             std::chrono::steady_clock::time_point deadline, MPI_Comm group,
                             RankResult& result);

}  // namespace scalebench::program
