#include "orchestrator/adaptive_rounds.h"

#include <algorithm>
#include <limits>

namespace scalebench {

AdaptiveRounds::AdaptiveRounds(const std::vector<CellSpec>& cells)
    : cells_(cells), reasons_(cells.size()) {
  for (size_t i = 0; i < cells.size(); ++i) {
    const CellSpec& cell = cells[i];
    if (cell.adaptive_repetitions && cell.repetition >= kMinAdaptiveRounds) {
      held_.insert(i);
      continue;
    }
    if (cell.adaptive_repetitions) outstanding_.insert(i);
    initial_.push_back(i);
  }
}

void AdaptiveRounds::finished(size_t index) {
  outstanding_.erase(index);
  held_.erase(index);
}

size_t AdaptiveRounds::drop_held() {
  const size_t count = held_.size();
  held_.clear();
  return count;
}

std::set<std::string> AdaptiveRounds::held_series() const {
  std::set<std::string> series;
  for (const size_t index : held_) series.insert(series_id(cells_[index]));
  return series;
}

int64_t AdaptiveRounds::round_ready() const {
  if (held_.empty()) return -1;
  int64_t next = std::numeric_limits<int64_t>::max();
  for (const size_t index : held_) next = std::min(next, cells_[index].repetition);
  for (const size_t index : outstanding_) {
    if (cells_[index].repetition < next) return -1;  // an earlier round is still out
  }
  return next;
}

std::vector<size_t> AdaptiveRounds::release(int64_t round, const AdaptiveLook& look,
                                            bool out_of_budget, std::vector<size_t>& retired) {
  std::vector<size_t> released;
  retired.clear();
  for (auto it = held_.begin(); it != held_.end();) {
    const size_t index = *it;
    const CellSpec& cell = cells_[index];
    const std::string series = series_id(cell);
    const bool undecided = look.undecided.count(series) != 0;
    if (undecided && !out_of_budget) {
      if (cell.repetition == round) {
        released.push_back(index);
        outstanding_.insert(index);
        it = held_.erase(it);
        continue;
      }
      ++it;
      continue;
    }
    reasons_[index] = out_of_budget && undecided
                          ? "repetitions auto: repetitions_budget_s " +
                                std::to_string(cell.repetitions_budget_s) + " s was spent after " +
                                std::to_string(round) + " runs, still undecided"
                          : "repetitions auto: every comparison of the series was decided after " +
                                std::to_string(round) + " runs";
    retired.push_back(index);
    it = held_.erase(it);
  }
  return released;
}

std::string AdaptiveRounds::reason_of(size_t index) const { return reasons_.at(index); }

double AdaptiveRounds::budget_s() const {
  double budget = 0;
  for (const size_t index : held_) {
    const double own = cells_[index].repetitions_budget_s;
    if (own > 0 && (budget == 0 || own < budget)) budget = own;
  }
  return budget;
}

}  // namespace scalebench
