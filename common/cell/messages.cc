#include "common/cell/messages.h"

#include <algorithm>

namespace scalebench {

std::filesystem::path resolve_in_tree(const std::filesystem::path& tree,
                                      const std::string& relative) {
  const std::filesystem::path path(relative);
  return (path.is_absolute() ? path : tree / path).lexically_normal();
}

std::vector<std::string> phase_union(const std::vector<RankResult>& ranks) {
  std::vector<std::string> phases;
  for (const auto& r : ranks) {
    for (const auto& p : r.phases) {
      if (std::find(phases.begin(), phases.end(), p) == phases.end()) phases.push_back(p);
    }
  }
  return phases;
}

}  // namespace scalebench
