// The one batch search loop (protocol/group_batch_search.h) with a probe that stands in for a
// cell: memory grows linearly with the batch. Every rank runs the same search (the probes are
// reduced over MPI_COMM_WORLD, as a group's are). Checks what both kinds of cell get from it:
// the boundary within batch_precision, the refinement probe inside the safety margin, the
// start moved past a failing min_batch, and a search that runs out of time keeping its boundary
// (Note [Search time]).
#include "protocol/group_batch_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "protocol/mpi_comm.h"

namespace scalebench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kMiB = 1 << 20;

/// A stand-in cell: 100 MiB + 1 MiB a sample, a step of batch x step_s_per_sample.
struct FakeProbe {
  double budget_bytes = 1000 * kMiB;
  double step_s_per_sample = 0;  ///< > 0: each probe sleeps its steps
  int64_t fails_below = 0;       ///< batches below it fail for a reason other than memory
  int64_t times_out_at = 0;      ///< a probe of this batch or above runs out of time (0: none)
  std::vector<int64_t> probed;

  GroupProbeRun operator()(int64_t batch, Clock::time_point /*deadline*/) {
    probed.push_back(batch);
    LocalProbe local;
    if (batch < fails_below) local.failure = "Expected more than 1 value per channel";
    if (times_out_at > 0 && batch >= times_out_at) local.timed_out = true;
    local.peak_bytes = 100 * kMiB + static_cast<double>(batch) * kMiB;
    if (local.failure.empty() && !local.timed_out && local.peak_bytes > budget_bytes) {
      local.status = ProbeStatus::kOverBudget;
    }
    const double step_s = std::max(1e-4, step_s_per_sample * static_cast<double>(batch));
    if (step_s_per_sample > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(2 * step_s));
    }
    local.times_s = {step_s, step_s};
    local.median_s = step_s;
    local.p99_s = step_s;
    return GroupProbeRun{reduce_probe(local, batch, world_size(), MPI_COMM_WORLD), local.failure};
  }
};

CellSpec auto_cell(double timeout_s = 600) {
  CellSpec cell;
  cell.batch_size = kBatchAuto;
  cell.min_batch = 1;
  cell.max_batch = 65536;
  cell.timeout_s = timeout_s;
  cell.max_seconds = 10;
  return cell;
}

GroupSearchResult run_search(const CellSpec& cell, FakeProbe& fake) {
  const ProbeOneBatch probe = [&fake](int64_t batch, Clock::time_point deadline) {
    return fake(batch, deadline);
  };
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(cell.timeout_s));
  return search_group_batch(cell, fake.budget_bytes, probe, deadline, MPI_COMM_WORLD);
}

TEST(GroupBatchSearch, FindsTheBoundaryWithinItsPrecisionAndRefinesInsideTheMargin) {
  CellSpec cell = auto_cell();
  cell.safety_margin = 0.3;  // the cap: 700 MiB, batch 600 by the line
  FakeProbe fake;            // 900 fits the budget of 1000 MiB, 901 not
  const GroupSearchResult search = run_search(cell, fake);
  ASSERT_FALSE(search.failed) << search.reason;
  EXPECT_TRUE(search.stopped_reason.empty()) << search.stopped_reason;
  const BatchFigures& figures = search.choice.figures;
  EXPECT_LE(figures.max_batch_ok, 900);
  EXPECT_GT(figures.oom_batch, 900);
  EXPECT_LE(figures.oom_batch - figures.max_batch_ok,
            std::max<int64_t>(1, std::llround(std::floor(0.02 * figures.max_batch_ok))));
  // The refinement probe (Note [Batch refinement]) is the line's batch at the cap, probed.
  EXPECT_NEAR(static_cast<double>(search.refined_batch), 600, 1);
  EXPECT_EQ(fake.probed.back(), search.refined_batch);
  EXPECT_EQ(figures.recommended_batch, search.refined_batch);
}

TEST(GroupBatchSearch, MovesItsStartPastABatchThatFailsForAnotherReason) {
  CellSpec cell = auto_cell();
  FakeProbe fake;
  fake.fails_below = 3;  // batch 1 and 2 fail (batch norm), 4 is the start
  const GroupSearchResult search = run_search(cell, fake);
  ASSERT_FALSE(search.failed) << search.reason;
  EXPECT_EQ(search.start_batch, 4);
  EXPECT_NE(search.start_reason.find("Expected more than 1 value"), std::string::npos);
  RankResult result;
  record_search(search, fake.budget_bytes, result);
  EXPECT_EQ(result.effective.at("min_batch"), "4");
  EXPECT_EQ(result.probes.size(), search.probes.size());
}

TEST(GroupBatchSearch, AProbeThatRunsOutOfTimeKeepsTheBoundaryFound) {
  CellSpec cell = auto_cell();
  FakeProbe fake;
  fake.times_out_at = 512;  // 256 fit; the probe of 512 is cut by the deadline
  const GroupSearchResult search = run_search(cell, fake);
  ASSERT_FALSE(search.failed) << search.reason;
  EXPECT_EQ(search.choice.figures.max_batch_ok, 256);
  EXPECT_NE(search.stopped_reason.find("stopped for time"), std::string::npos);
  EXPECT_NE(search.stopped_reason.find("batch 256 fits"), std::string::npos)
      << search.stopped_reason;
  EXPECT_EQ(search.refined_batch, 0) << "no refinement once out of time";
  RankResult result;
  record_search(search, fake.budget_bytes, result);
  ASSERT_EQ(result.ineffective_reasons.size(), 1U);
  EXPECT_EQ(result.ineffective_reasons[0], search.stopped_reason);
}

TEST(GroupBatchSearch, OutOfTimeBeforeAnythingFitsFailsTheCellWithTimeout) {
  CellSpec cell = auto_cell();
  FakeProbe fake;
  fake.times_out_at = 1;
  const GroupSearchResult search = run_search(cell, fake);
  ASSERT_TRUE(search.failed);
  EXPECT_EQ(search.status, CellStatus::kTimeout);
}

TEST(GroupBatchSearch, KeepsToItsShareOfTheCellsTime) {
  // 2 s for the cell: the search gets 1 s (the reserve is at least a quarter, at most half
  // of it). Each probe sleeps 2 ms a sample, so the doubling would need minutes: the search
  // stops before a probe predicted past its share, with the boundary it has. On a busy
  // machine the probes only take longer, and the search stops earlier; it always stops.
  CellSpec cell = auto_cell(2.0);
  FakeProbe fake;
  fake.budget_bytes = 1e15;
  fake.step_s_per_sample = 1e-3;
  const auto start = Clock::now();
  const GroupSearchResult search = run_search(cell, fake);
  const double took_s = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(search.failed) << search.reason;
  EXPECT_GT(search.choice.figures.max_batch_ok, 0);
  EXPECT_NE(search.stopped_reason.find("would end past the search's share"), std::string::npos)
      << search.stopped_reason;
  // Not a timing assertion: the whole doubling would sleep over four minutes.
  EXPECT_LT(took_s, 60.0) << "the search kept to its share";
  EXPECT_LT(search.probes.size(), 12U);
}

TEST(GroupBatchSearch, SearchDeadlineReservesTheTimedRun) {
  const auto start = Clock::now();
  const auto at = [&](double seconds) {
    return start +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  const auto share = [&](const CellSpec& cell, double total_s) {
    return std::chrono::duration<double>(search_deadline(cell, start, at(total_s)) - start).count();
  };
  CellSpec cell = auto_cell();
  cell.max_seconds = 60;
  EXPECT_NEAR(share(cell, 200), 125, 1e-6);  // reserve 1.25 x 60 s
  EXPECT_NEAR(share(cell, 600), 450, 1e-6);  // at least a quarter
  EXPECT_NEAR(share(cell, 100), 50, 1e-6);   // at most half
  cell.max_seconds = 1;
  EXPECT_NEAR(share(cell, 100), 75, 1e-6);  // at least a quarter
}

}  // namespace
}  // namespace scalebench
