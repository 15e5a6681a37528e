#include "common/cell/cell_outcome.h"

#include <gtest/gtest.h>

#include <set>

namespace scalebench {
namespace {

TEST(FailurePhase, EveryPhaseHasOneNameThatReadsBack) {
  std::set<std::string> names;
  for (int i = 0; i <= static_cast<int>(FailurePhase::kInterrupted); ++i) {
    const auto phase = static_cast<FailurePhase>(i);
    const std::string name = to_string(phase);
    EXPECT_NE(name, "?") << i;
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(parse_failure_phase(name), phase) << name;
  }
  EXPECT_EQ(to_string(FailurePhase::kNone), "");
  EXPECT_EQ(parse_failure_phase("comm"), std::nullopt);
}

}  // namespace
}  // namespace scalebench
