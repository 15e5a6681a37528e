// The test-only fault switch (Note [Fault injection]): its spec is checked, and a point
// fires only for its rank, its name and its nth hit. The kinds that end the process are
// exercised by tests/faults/fault_matrix.py.
#include "protocol/fault_injection.h"

#include <gtest/gtest.h>

#include "common/base/error.h"

namespace scalebench {
namespace {

class FaultInjection : public ::testing::Test {
 protected:
  void TearDown() override { set_fault_for_testing(std::nullopt); }
};

TEST_F(FaultInjection, ParsesKindPointRankAndCount) {
  const FaultSpec spec = parse_fault_spec("oom:forward:2:3");
  EXPECT_EQ(spec.kind, FaultKind::kOom);
  EXPECT_EQ(spec.point, "forward");
  EXPECT_EQ(spec.rank, 2);
  EXPECT_EQ(spec.nth, 3);
  EXPECT_EQ(parse_fault_spec("sigterm:write:0").nth, 1);
}

TEST_F(FaultInjection, RejectsMalformedSpecsWithTheReason) {
  for (const char* text :
       {"", "throw", "throw:forward", "boom:forward:1", "throw:nowhere:1", "throw:forward:x",
        "throw:forward:1:0", "throw:forward:1:2:3", "throw:forward:-1"}) {
    SCOPED_TRACE(text);
    EXPECT_THROW(parse_fault_spec(text), InputError);
  }
  try {
    parse_fault_spec("boom:forward:1");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown kind 'boom'"), std::string::npos) << e.what();
  }
}

TEST_F(FaultInjection, FiresOnlyAtItsPointRankAndNthHit) {
  set_fault_for_testing(parse_fault_spec("throw:backward:2:2"));
  EXPECT_NO_THROW(fault_point("backward", 1));  // other rank
  EXPECT_NO_THROW(fault_point("forward", 2));   // other point
  EXPECT_NO_THROW(fault_point("backward", 2));  // first hit
  try {
    fault_point("backward", 2);
    FAIL() << "the second hit must throw";
  } catch (const CellError& e) {
    EXPECT_EQ(e.phase(), FailurePhase::kBackward);
    EXPECT_NE(std::string(e.what()).find("injected fault at backward"), std::string::npos);
  }
  EXPECT_NO_THROW(fault_point("backward", 2));  // fires once
}

TEST_F(FaultInjection, OomIsAnOutOfMemoryErrorAndOtherPointsAreWorkerPhase) {
  set_fault_for_testing(parse_fault_spec("oom:receive:1"));
  try {
    fault_point("receive", 1);
    FAIL() << "must throw";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.phase(), FailurePhase::kWorker);
  }
}

TEST_F(FaultInjection, DisarmedByDefault) {
  for (const auto point : kFaultPoints) EXPECT_NO_THROW(fault_point(point, 0));
}

}  // namespace
}  // namespace scalebench
