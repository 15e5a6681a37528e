// Note [Scheduling]: group choice, dispatch planning per mode, and the stateful queue.
#include "orchestrator/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace scalebench {
namespace {

/// Workers r = 1.. on hosts given by name, local indices in order of appearance per host.
std::vector<WorkerSlot> workers_on(const std::vector<std::string>& hosts) {
  std::vector<WorkerSlot> workers;
  std::map<std::string, int> next_local;
  for (size_t i = 0; i < hosts.size(); ++i) {
    workers.push_back({static_cast<int>(i) + 1, hosts[i], next_local[hosts[i]]++});
  }
  return workers;
}

TEST(UnschedulableReason, TooBigAndNonPositiveCellsHaveReasons) {
  EXPECT_EQ(unschedulable_reason(2, 3), std::nullopt);
  EXPECT_EQ(unschedulable_reason(3, 3), std::nullopt);
  const auto too_big = unschedulable_reason(4, 3);
  ASSERT_TRUE(too_big);
  EXPECT_NE(too_big->find("needs 4 workers but the job has 3"), std::string::npos);
  EXPECT_NE(too_big->find("-np 5"), std::string::npos);
  EXPECT_TRUE(unschedulable_reason(0, 3));
}

struct GroupCase {
  std::string name;
  std::vector<std::string> hosts;
  std::vector<int> busy;  ///< world ranks not free
  int world_size;
  std::optional<std::vector<int>> expected;
};

class ChooseGroupTest : public testing::TestWithParam<GroupCase> {};

TEST_P(ChooseGroupTest, PicksExpectedMembers) {
  const auto& param = GetParam();
  std::vector<WorkerSlot> free;
  for (const auto& worker : workers_on(param.hosts)) {
    if (std::find(param.busy.begin(), param.busy.end(), worker.world_rank) == param.busy.end()) {
      free.push_back(worker);
    }
  }
  EXPECT_EQ(choose_group(free, param.world_size), param.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ChooseGroupTest,
    testing::Values(
        GroupCase{"single_node_lowest_local", {"a", "a", "a", "a"}, {}, 2, std::vector{1, 2}},
        GroupCase{"skips_busy", {"a", "a", "a", "a"}, {1, 3}, 2, std::vector{2, 4}},
        GroupCase{"not_enough_free", {"a", "a", "a"}, {2}, 3, std::nullopt},
        GroupCase{"zero_world_size", {"a"}, {}, 0, std::nullopt},
        // b has 2 free, a has 3: best fit picks the smaller node that still fits.
        GroupCase{"best_fit_node", {"a", "a", "a", "b", "b"}, {}, 2, std::vector{4, 5}},
        // interleaved ranks: still one node, in local-index order.
        GroupCase{"interleaved_hosts", {"a", "b", "a", "b"}, {}, 2, std::vector{1, 3}},
        // no node has 3 free: take the node with most free first, then the next.
        GroupCase{"spans_fewest_nodes", {"a", "a", "b", "b", "c"}, {2}, 3, std::vector{3, 4, 1}},
        GroupCase{"whole_job", {"a", "b"}, {}, 2, std::vector{1, 2}}),
    [](const auto& info) { return info.param.name; });

TEST(PlanDispatches, ExclusiveStartsOneCellOnlyWhenNothingRuns) {
  const auto workers = workers_on({"a", "a", "a"});
  const std::vector<PendingCell> pending{{0, 1}, {1, 1}, {2, 2}};
  const auto first = plan_dispatches(pending, workers, 0, SchedulingMode::kExclusive);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0], (Dispatch{0, {1}}));
  EXPECT_TRUE(plan_dispatches(pending, workers, 1, SchedulingMode::kExclusive).empty());
}

TEST(PlanDispatches, PackedFillsFreeWorkersWithBackfill) {
  const auto workers = workers_on({"a", "a", "a", "a"});
  // 3 + 2 do not fit together in 4; the later 1-worker cell backfills.
  const std::vector<PendingCell> pending{{0, 3}, {1, 2}, {2, 1}, {3, 1}};
  const auto dispatches = plan_dispatches(pending, workers, 0, SchedulingMode::kPacked);
  ASSERT_EQ(dispatches.size(), 2u);
  EXPECT_EQ(dispatches[0], (Dispatch{0, {1, 2, 3}}));
  EXPECT_EQ(dispatches[1], (Dispatch{2, {4}}));
}

TEST(PlanDispatches, PackedGroupsAreDisjoint) {
  const auto workers = workers_on({"a", "a", "b", "b", "b"});
  const std::vector<PendingCell> pending{{0, 2}, {1, 2}, {2, 1}, {3, 2}};
  std::set<int> used;
  size_t members = 0;
  for (const auto& d : plan_dispatches(pending, workers, 0, SchedulingMode::kPacked)) {
    for (const int rank : d.members) used.insert(rank);
    members += d.members.size();
  }
  EXPECT_EQ(used.size(), members);
  EXPECT_EQ(members, 5u);
}

TEST(Scheduler, RunsEveryCellOnceAndReleasesWorkers) {
  for (const auto mode : {SchedulingMode::kExclusive, SchedulingMode::kPacked}) {
    Scheduler scheduler(workers_on({"a", "a", "a"}), {{0, 1}, {1, 2}, {2, 3}, {3, 1}, {4, 2}},
                        mode);
    std::vector<size_t> started;
    size_t max_running = 0;
    while (!scheduler.done()) {
      auto dispatches = scheduler.take_dispatches();
      ASSERT_FALSE(dispatches.empty() && scheduler.running_count() == 0) << "stalled";
      for (const auto& d : dispatches) started.push_back(d.index);
      max_running = std::max(max_running, scheduler.running_count());
      for (const auto& d : dispatches) scheduler.release(d.members);  // all finish at once
    }
    std::sort(started.begin(), started.end());
    EXPECT_EQ(started, (std::vector<size_t>{0, 1, 2, 3, 4})) << to_string(mode);
    if (mode == SchedulingMode::kExclusive) {
      EXPECT_EQ(max_running, 1u);
    } else {
      EXPECT_EQ(max_running, 2u);  // {0,1}, {2}, {3,4}
    }
  }
}

TEST(Scheduler, DropPendingLeavesRunningCells) {
  Scheduler scheduler(workers_on({"a", "a"}), {{0, 1}, {1, 1}, {2, 1}}, SchedulingMode::kPacked);
  const auto dispatches = scheduler.take_dispatches();
  ASSERT_EQ(dispatches.size(), 2u);
  EXPECT_EQ(scheduler.drop_pending().size(), 1u);
  EXPECT_FALSE(scheduler.done());
  scheduler.release(dispatches[0].members);
  scheduler.release(dispatches[1].members);
  EXPECT_TRUE(scheduler.done());
  EXPECT_TRUE(scheduler.take_dispatches().empty());
}

TEST(SchedulingMode, ParsesAndPrints) {
  EXPECT_EQ(parse_scheduling_mode("packed"), SchedulingMode::kPacked);
  EXPECT_EQ(parse_scheduling_mode("exclusive"), SchedulingMode::kExclusive);
  EXPECT_EQ(parse_scheduling_mode("Packed"), std::nullopt);
  EXPECT_EQ(to_string(SchedulingMode::kPacked), "packed");
}

TEST(RunOptions, LogDirDefaultsNextToOutput) {
  RunOptions options;
  options.output_path = "out/results.h5";
  EXPECT_EQ(options.effective_log_dir(), std::filesystem::path("out/results.h5.logs"));
  options.log_dir = "logs";
  EXPECT_EQ(options.effective_log_dir(), std::filesystem::path("logs"));
}

}  // namespace
}  // namespace scalebench
