// The order in which rank 0 hands out cells: matrix order, with the repetitions of
// interleaved cells run in rounds (Note [Repetitions] in common/cell/repetition_stats.h).
// Pure.
//
// Note [Rounds]
// ~~~~~~~~~~~~~
// Round k is repetition k of every interleaved cell, in a seeded random order within the
// round, and round k ends before round k+1 starts (a randomised complete block design). A
// drift of the machine (thermal, another job, a page cache filling) then hits every cell
// of a round alike instead of biasing the ones that happened to run during it, and
// repetition k of two cells ran close in time: the analysis judges them as pairs
// (analysis/.../tables/runs.py rounds_paired, issue 40). A plain shuffle of all
// repetitions, the order before 2026-11-28, ran one side's three repetitions before the
// other's in 1 draw of 10 for two cells of 3. (Note [Repetitions]'s "seeded random order"
// is this one; it is not restated there, so that the headers every file includes keep
// their text and their compiler-cache and clang-tidy keys.)
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
