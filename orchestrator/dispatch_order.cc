#include "orchestrator/dispatch_order.h"

#include <algorithm>
#include <utility>

#include "common/cell/repetition_stats.h"

namespace scalebench {

bool is_interleaved(const CellSpec& cell) { return cell.repetitions > 1 && cell.interleave; }

std::vector<CellSpec> dispatch_order(std::vector<CellSpec> cells, uint64_t seed) {
  std::vector<size_t> positions;
  int rounds = 0;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (!is_interleaved(cells[i])) continue;
    positions.push_back(i);
    rounds = std::max(rounds, static_cast<int>(cells[i].repetition) + 1);
  }
  // Round r holds repetition r of every interleaved cell, in matrix order, then shuffled
  // (Fisher-Yates: swap item i with one of 0..i); the rounds follow one another.
  std::vector<CellSpec> order;
  order.reserve(positions.size());
  uint64_t state = seed;
  for (int round = 0; round < rounds; ++round) {
    const size_t begin = order.size();
    for (const size_t position : positions) {
      if (cells[position].repetition == round) order.push_back(cells[position]);
    }
    for (size_t i = order.size() - begin; i > 1; --i) {
      const size_t j = splitmix64_next(state) % i;
      std::swap(order[begin + i - 1], order[begin + j]);
    }
  }
  for (size_t k = 0; k < positions.size(); ++k) cells[positions[k]] = std::move(order[k]);
  return cells;
}

uint64_t default_order_seed(const std::string& matrix_hash) { return fnv1a64(matrix_hash); }

}  // namespace scalebench
