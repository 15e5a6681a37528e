#include "common/cell/block_rules.h"

#include <algorithm>

namespace scalebench {

int64_t FixedBlocks::next_block(double /*elapsed_s*/) const { return ran_ ? 0 : count_; }

bool FixedBlocks::add_block(const std::vector<double>& /*group_times_s*/, double /*elapsed_s*/) {
  ran_ = true;
  return true;
}

int64_t WarmupBlocks::next_block(double /*elapsed_s*/) const { return rule_.next_window(); }

bool WarmupBlocks::add_block(const std::vector<double>& group_times_s, double elapsed_s) {
  return rule_.add_window(group_times_s, elapsed_s);
}

int64_t AdaptiveBlocks::next_block(double elapsed_s) const {
  return decision_ ? 0 : std::max<int64_t>(rule_.next_block(elapsed_s), 0);
}

bool AdaptiveBlocks::add_block(const std::vector<double>& group_times_s, double elapsed_s) {
  decision_ = rule_.add_block(group_times_s, elapsed_s);
  return decision_.has_value();
}

}  // namespace scalebench
