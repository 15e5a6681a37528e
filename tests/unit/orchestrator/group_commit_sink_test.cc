// Note [Group commit]: records reach the file in order and all of them, grouped into fewer
// updates than records; a flush commits at once whatever the pacing; a failed commit leaves
// the file as it was and is rethrown on the caller's thread.
#include "orchestrator/group_commit_sink.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "../common/results_store_test_util.h"
#include "common/base/error.h"

namespace scalebench {
namespace {

constexpr const char* kHash = "groupcommit00000";

struct Fixture {
  testing_util::TempDir dir;
  std::filesystem::path path = dir.path() / "r.h5";
  ResultsStore store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
};

CellSpec small_cell(uint64_t seed) { return testing_util::train_cell(seed, 2, 1, 5); }

TEST(GroupCommitSink, EveryRecordIsCommittedInFewerUpdatesThanRecords) {
  Fixture f;
  // A long pause after each commit: everything queued meanwhile goes into the next one.
  GroupCommitSink sink(f.store, {.duty = 0.01, .max_delay_s = 5.0});
  constexpr int kCells = 40;
  for (int i = 0; i < kCells; ++i) {
    const CellSpec cell = small_cell(i);
    sink.mark_running(cell, {1, 2});
    sink.complete(cell, testing_util::full_results(cell));
  }
  sink.mark_skipped(small_cell(1000), "needs 64 workers, the job has 2");
  sink.flush();
  const GroupCommitStats stats = sink.stats();
  EXPECT_EQ(static_cast<size_t>(2 * kCells + 1), stats.records);
  EXPECT_LT(stats.commits, static_cast<size_t>(kCells));
  sink.close();

  const auto cells = f.store.cells();
  ASSERT_EQ(static_cast<size_t>(kCells + 1), cells.size());
  for (int i = 0; i < kCells; ++i) {
    EXPECT_EQ(CellStatus::kOk, cells.at(small_cell(i).cell_id).status) << i;
  }
  EXPECT_EQ(CellStatus::kSkipped, cells.at(small_cell(1000).cell_id).status);
}

TEST(GroupCommitSink, LaterRecordsOfTheSameCellWinInOrder) {
  Fixture f;
  GroupCommitSink sink(f.store);
  const CellSpec cell = small_cell(7);
  sink.mark_running(cell, {1, 2});
  sink.finish_without_results(cell, CellStatus::kTimeout, FailurePhase::kWatchdog, "late");
  sink.close();
  const StoredCell stored = f.store.cells().at(cell.cell_id);
  EXPECT_EQ(CellStatus::kTimeout, stored.status);
  EXPECT_EQ("late", stored.reason);
  EXPECT_EQ("watchdog", stored.failed_phase);
}

TEST(GroupCommitSink, FlushCommitsAtOnceWhateverThePacing) {
  Fixture f;
  // Without the flush's wake-up the second record would wait a minute.
  GroupCommitSink sink(f.store, {.duty = 0.0001, .max_delay_s = 60.0});
  sink.mark_running(small_cell(1), {1, 2});
  sink.flush();
  const auto start = std::chrono::steady_clock::now();
  sink.mark_running(small_cell(2), {1, 2});
  sink.flush();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  sink.close();
  EXPECT_EQ(2U, f.store.cells().size());
}

TEST(GroupCommitSink, CloseCommitsWhatIsQueued) {
  Fixture f;
  {
    GroupCommitSink sink(f.store, {.duty = 0.0001, .max_delay_s = 60.0});
    sink.mark_running(small_cell(1), {1, 2});
    sink.mark_running(small_cell(2), {1, 2});
  }  // the destructor closes
  EXPECT_EQ(2U, f.store.cells().size());
}

TEST(GroupCommitSink, AFailedCommitLeavesTheFileAsItWasAndIsRethrown) {
  Fixture f;
  // A long pause after the first commit: the next two records form one group.
  GroupCommitSink sink(f.store, {.duty = 0.0001, .max_delay_s = 60.0});
  const CellSpec kept = small_cell(1);
  sink.complete(kept, testing_util::full_results(kept));
  sink.flush();
  // complete_cell refuses a cell without rank results: the writer's commit throws.
  sink.mark_running(small_cell(2), {1, 2});
  sink.complete(small_cell(3), {});
  EXPECT_THROW(sink.flush(), Error);
  // Nothing of the failed group reached the file; nothing more is accepted.
  const auto cells = f.store.cells();
  ASSERT_EQ(1U, cells.size());
  EXPECT_EQ(CellStatus::kOk, cells.at(kept.cell_id).status);
  EXPECT_THROW(sink.mark_running(small_cell(4), {1, 2}), Error);
  EXPECT_THROW(sink.close(), Error);
  EXPECT_EQ(1U, f.store.cells().size());
}

TEST(GroupCommitSink, BadPacingIsRefused) {
  Fixture f;
  EXPECT_THROW(GroupCommitSink(f.store, {.duty = 0.0}), Error);
  EXPECT_THROW(GroupCommitSink(f.store, {.duty = 1.5}), Error);
  EXPECT_THROW(GroupCommitSink(f.store, {.duty = 0.5, .max_delay_s = -1}), Error);
}

}  // namespace
}  // namespace scalebench
