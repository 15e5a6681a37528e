// Note [Operator profiles]: the events of profiled steps reduced to the operator table.
#include "common/cell/op_profile.h"

#include <gtest/gtest.h>

namespace scalebench {
namespace {

using Kind = ProfiledEvent::Kind;

ProfiledEvent event(Kind kind, const std::string& name, uint64_t thread, int64_t start,
                    int64_t end) {
  ProfiledEvent made;
  made.kind = kind;
  made.name = name;
  made.thread = thread;
  made.start_ns = start;
  made.end_ns = end;
  return made;
}
ProfiledEvent op(const std::string& name, uint64_t thread, int64_t start, int64_t end,
                 uint64_t correlation = 0) {
  ProfiledEvent made = event(Kind::kOp, name, thread, start, end);
  made.correlation = correlation;
  return made;
}
ProfiledEvent phase(const std::string& name, int64_t start, int64_t end) {
  return event(Kind::kPhase, name, 1, start, end);
}
ProfiledEvent memory(uint64_t thread, int64_t at, int64_t bytes) {
  ProfiledEvent made = event(Kind::kMemory, "[memory]", thread, at, at);
  made.bytes = bytes;
  return made;
}
ProfiledEvent kernel(const std::string& name, int64_t start, int64_t end, uint64_t link) {
  ProfiledEvent made = event(Kind::kKernel, name, 99, start, end);
  made.link = link;
  return made;
}

const OpRow* find(const std::vector<OpRow>& rows, const std::string& name,
                  const std::string& phase) {
  for (const auto& row : rows) {
    if (row.name == name && row.phase == phase) return &row;
  }
  return nullptr;
}

// One step: forward (linear -> addmm) and backward on another thread (autograd's), inside
// the step phase; memory given to the innermost op open on its thread.
TEST(OpProfile, SelfTimePhaseAndMemoryFromNesting) {
  const std::vector<ProfiledEvent> events{
      phase("step", 0, 1000),
      phase("forward", 100, 500),
      phase("backward", 500, 900),
      op("aten::linear", 1, 100, 400, 7),
      op("aten::addmm", 1, 150, 350),
      memory(1, 160, 4096),
      memory(1, 200, -1024),
      memory(1, 120, 512),  // in linear, before addmm began
      op("aten::relu", 1, 400, 450),
      op("AddmmBackward0", 2, 550, 800),  // autograd thread: phase by time
      op("aten::mm", 2, 600, 700),
      op("aten::mm", 2, 700, 750),
      op("aten::zero_", 1, 950, 960),  // in step, after backward: the step phase
  };
  const auto rows = summarize_profile(events);
  ASSERT_EQ(rows.size(), 6U);
  const OpRow* linear = find(rows, "aten::linear", "forward");
  ASSERT_NE(linear, nullptr);
  EXPECT_EQ(linear->count, 1);
  EXPECT_DOUBLE_EQ(linear->total_s, 300e-9);
  EXPECT_DOUBLE_EQ(linear->self_s, 100e-9);  // 300 - addmm's 200
  EXPECT_DOUBLE_EQ(linear->self_cpu_memory_bytes, 512);
  const OpRow* addmm = find(rows, "aten::addmm", "forward");
  ASSERT_NE(addmm, nullptr);
  EXPECT_DOUBLE_EQ(addmm->self_s, 200e-9);
  EXPECT_DOUBLE_EQ(addmm->self_cpu_memory_bytes, 3072);
  const OpRow* mm = find(rows, "aten::mm", "backward");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->count, 2);
  EXPECT_DOUBLE_EQ(mm->self_s, 150e-9);
  const OpRow* backward = find(rows, "AddmmBackward0", "backward");
  ASSERT_NE(backward, nullptr);
  EXPECT_DOUBLE_EQ(backward->self_s, 100e-9);  // 250 - two mm
  EXPECT_NE(find(rows, "aten::zero_", "step"), nullptr);
  EXPECT_NE(find(rows, "aten::relu", "forward"), nullptr);
  // Self time descending.
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].self_s, rows[i].self_s);
  EXPECT_EQ(rows.front().name, "aten::addmm");
}

// Rows aggregate by (device, phase, name); a kernel takes the phase of the op that launched
// it, or "" when no op has its correlation id.
TEST(OpProfile, KernelsTakeTheirLaunchingOpsPhase) {
  const std::vector<ProfiledEvent> events{
      phase("forward", 0, 100),
      phase("backward", 100, 200),
      op("cudaLaunchKernel", 1, 10, 20, 41),
      op("cudaLaunchKernel", 1, 110, 120, 42),
      kernel("gemm", 5000, 5300, 41),
      kernel("gemm", 5300, 5500, 42),
      kernel("orphan", 6000, 6100, 77),
  };
  const auto rows = summarize_profile(events);
  const OpRow* forward = find(rows, "gemm", "forward");
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(forward->device, "cuda");
  EXPECT_DOUBLE_EQ(forward->self_s, 300e-9);
  EXPECT_DOUBLE_EQ(forward->total_s, 300e-9);
  const OpRow* backward = find(rows, "gemm", "backward");
  ASSERT_NE(backward, nullptr);
  EXPECT_DOUBLE_EQ(backward->self_s, 200e-9);
  const OpRow* orphan = find(rows, "orphan", "");
  ASSERT_NE(orphan, nullptr);
  const OpRow* launches = find(rows, "cudaLaunchKernel", "forward");
  ASSERT_NE(launches, nullptr);
  EXPECT_EQ(launches->device, "cpu");
}

// Events outside every phase scope, and ops whose end precedes their start.
TEST(OpProfile, NoPhaseAndBackwardsEvents) {
  const auto rows = summarize_profile({op("a", 1, 100, 50), op("b", 1, 200, 300)});
  ASSERT_EQ(rows.size(), 2U);
  EXPECT_EQ(rows[0].name, "b");
  EXPECT_EQ(rows[0].phase, "");
  EXPECT_DOUBLE_EQ(rows[1].total_s, 0.0);
  EXPECT_TRUE(summarize_profile({}).empty());
}

}  // namespace
}  // namespace scalebench
