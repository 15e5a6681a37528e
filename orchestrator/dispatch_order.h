// The order in which rank 0 hands out cells: matrix order, with the repetitions of
// interleaved cells run in rounds (Note [Repetitions] in common/cell/repetition_stats.h).
// Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/cell/cell_spec.h"

namespace scalebench {

/// True when `cell` takes part in the rounds: repetitions > 1 and interleave.
bool is_interleaved(const CellSpec& cell);

/// `cells` with the interleaved ones reordered among the positions they occupy, in rounds:
/// round r is repetition r of every interleaved cell (those with more than r repetitions),
/// in an order shuffled per round (Fisher-Yates drawn from splitmix64 seeded with `seed`),
/// and round r runs before round r + 1 (ABBA BAAB ... for two cells). Every other cell keeps
/// its position, so a matrix without repetitions runs exactly in matrix order. The same cells
/// and seed give the same order on every machine.
std::vector<CellSpec> dispatch_order(std::vector<CellSpec> cells, uint64_t seed);

/// The default seed of a run: FNV-1a-64 of the matrix hash (the same matrix shuffles the
/// same way on every run and on --resume).
uint64_t default_order_seed(const std::string& matrix_hash);

}  // namespace scalebench
