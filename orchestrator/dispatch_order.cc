#include "orchestrator/dispatch_order.h"

#include <utility>

#include "common/cell/repetition_stats.h"

namespace scalebench {

bool is_interleaved(const CellSpec& cell) { return cell.repetitions > 1 && cell.interleave; }

std::vector<CellSpec> dispatch_order(std::vector<CellSpec> cells, uint64_t seed) {
  std::vector<size_t> positions;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (is_interleaved(cells[i])) positions.push_back(i);
  }
  uint64_t state = seed;
  // Fisher-Yates over the interleaved positions: swap position i with one of 0..i.
  for (size_t i = positions.size(); i > 1; --i) {
    const size_t j = splitmix64_next(state) % i;
    std::swap(cells[positions[i - 1]], cells[positions[j]]);
  }
  return cells;
}

uint64_t default_order_seed(const std::string& matrix_hash) { return fnv1a64(matrix_hash); }

}  // namespace scalebench
