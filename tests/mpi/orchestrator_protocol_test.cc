// Note [Orchestrator protocol] over real MPI ranks with the fake CellRunner and an
// in-memory ResultSink: every cell is recorded exactly once, running before final,
// groups of concurrent cells are disjoint, failures are recorded and the sweep goes on,
// cells too big for the job are skipped, and the ranks' results arrive intact.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/base/logging.h"
#include "fake_cell_runner.h"
#include "orchestrator/orchestrator.h"
#include "protocol/mpi_comm.h"
#include "protocol/worker_loop.h"

namespace scalebench {
namespace {

/// Records every sink call; checks group disjointness of concurrently running cells.
class MemorySink : public ResultSink {
 public:
  struct Record {
    std::vector<std::string> events;  ///< "running", "skipped", "complete", "finish:<status>"
    std::vector<int> ranks;
    std::vector<RankResult> results;
    CellStatus status = CellStatus::kRunning;
    std::string phase;
    std::string reason;
    std::vector<CellProgress> progress;  ///< Note [Cell progress] reports, in order
  };

  void mark_running(const CellSpec& cell, const std::vector<int>& ranks) override {
    auto& record = records[cell.cell_id];
    record.events.push_back("running");
    record.ranks = ranks;
    for (const int rank : ranks) {
      if (!busy_.insert(rank).second) overlap = true;
    }
    max_concurrent = std::max(max_concurrent, ++running_);
  }
  void mark_skipped(const CellSpec& cell, const std::string& reason) override {
    auto& record = records[cell.cell_id];
    record.events.push_back("skipped");
    record.status = CellStatus::kSkipped;
    record.reason = reason;
  }
  void complete(const CellSpec& cell, const std::vector<RankResult>& results) override {
    auto& record = finish(cell.cell_id, "complete");
    record.results = results;
    record.status = CellStatus::kOk;
  }
  void finish_without_results(const CellSpec& cell, CellStatus status, FailurePhase phase,
                              const std::string& reason) override {
    auto& record = finish(cell.cell_id, "finish:" + to_string(status));
    record.status = status;
    record.phase = to_string(phase);
    record.reason = reason;
  }
  void progress(const CellSpec& cell, const CellProgress& progress) override {
    records[cell.cell_id].progress.push_back(progress);
  }

  std::map<std::string, Record> records;
  bool overlap = false;
  int max_concurrent = 0;

 private:
  Record& finish(const std::string& id, const std::string& event) {
    auto& record = records[id];
    record.events.push_back(event);
    for (const int rank : record.ranks) busy_.erase(rank);
    --running_;
    return record;
  }
  std::set<int> busy_;
  int running_ = 0;
};

CellSpec make_cell(const std::string& experiment, Mode mode, int64_t batch, int world) {
  CellSpec cell;
  cell.experiment = experiment;
  cell.model.zoo = "mlp";
  cell.mode = mode;
  cell.batch_size = batch;
  cell.world_size = world;
  cell.warmup_iterations = 1;
  cell.measured_iterations = 6;
  cell.timeout_s = 60;
  return finalize_cell_id(cell);
}

/// train + infer x batch {8, 16} x world {1, 2}.
std::vector<CellSpec> grid_cells() {
  std::vector<CellSpec> cells;
  for (const auto mode : {Mode::kTrain, Mode::kInfer}) {
    for (const int64_t batch : {8, 16}) {
      for (const int world : {1, 2}) {
        cells.push_back(
            make_cell(mode == Mode::kTrain ? "mlp-train" : "mlp-infer", mode, batch, world));
      }
    }
  }
  return cells;
}

/// Runs the protocol on all ranks; returns the outcome and sink on rank 0.
std::pair<OrchestratorOutcome, MemorySink> run_everywhere(const std::vector<CellSpec>& cells,
                                                          const OrchestratorOptions& options) {
  init_logging({Verbosity::kQuiet, world_rank(), world_rank() == 0, {}});
  const WorkerContext context = discover_worker_context();
  MemorySink sink;
  OrchestratorOutcome outcome;
  if (world_rank() == 0) {
    const auto hellos = collect_hellos(world_size(), 0);
    EXPECT_EQ(hellos.size(), static_cast<size_t>(world_size() - 1));
    for (const auto& hello : hellos) EXPECT_EQ(hello.device.rfind("fake-cpu-", 0), 0u);
    outcome = run_orchestrator(cells, hellos, sink, options);
    EXPECT_FALSE(outcome.abort_message) << *outcome.abort_message;
    shutdown_workers(world_size());
  } else {
    testing_fake::FakeCellRunner runner;
    send_hello(context, runner);
    run_worker_loop(runner, context);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return {outcome, sink};
}

void expect_results_intact(const CellSpec& cell, const MemorySink::Record& record) {
  ASSERT_EQ(record.results.size(), static_cast<size_t>(cell.world_size));
  for (size_t g = 0; g < record.results.size(); ++g) {
    const auto& result = record.results[g];
    EXPECT_EQ(result.group_rank, static_cast<int>(g));
    EXPECT_EQ(result.world_rank, record.ranks[g]);
    EXPECT_EQ(result.cell_id, cell.cell_id);
    const size_t phases = cell.mode == Mode::kTrain ? 4 : 3;
    ASSERT_EQ(result.phases.size(), phases);
    ASSERT_EQ(result.iterations(), 7u);
    EXPECT_DOUBLE_EQ(result.timings_s[phases * 3 + 1],
                     testing_fake::fake_time_s(cell, static_cast<int>(g), 3, 1));
    // param_checksum = sum of group ranks + 0.5: the group communicator had world_size ranks.
    EXPECT_DOUBLE_EQ(result.metrics.at("param_checksum"),
                     cell.world_size * (cell.world_size - 1) / 2 + 0.5);
  }
}

class OrchestratorProtocol : public testing::TestWithParam<SchedulingMode> {};

TEST_P(OrchestratorProtocol, GridOfCellsAllOk) {
  const auto cells = grid_cells();
  OrchestratorOptions options;
  options.scheduling = GetParam();
  auto [outcome, sink] = run_everywhere(cells, options);
  if (world_rank() != 0) return;
  EXPECT_EQ(outcome.counts[CellStatus::kOk], cells.size());
  EXPECT_FALSE(outcome.interrupted);
  EXPECT_FALSE(sink.overlap);
  if (GetParam() == SchedulingMode::kExclusive) {
    EXPECT_EQ(sink.max_concurrent, 1);
  } else if (world_size() >= 3) {
    EXPECT_GE(sink.max_concurrent, 2);
  }
  ASSERT_EQ(sink.records.size(), cells.size());
  for (const auto& cell : cells) {
    const auto& record = sink.records.at(cell.cell_id);
    EXPECT_EQ(record.events, (std::vector<std::string>{"running", "complete"}));
    expect_results_intact(cell, record);
  }
}

TEST_P(OrchestratorProtocol, FailuresAreRecordedAndTheSweepGoesOn) {
  const std::vector<CellSpec> cells{
      make_cell("mlp-throw", Mode::kTrain, 8, 2), make_cell("mlp-fail", Mode::kTrain, 8, 2),
      make_cell("mlp-oom", Mode::kInfer, 8, 1),   make_cell("mlp-train", Mode::kTrain, 8, 64),
      make_cell("mlp-train", Mode::kTrain, 8, 1), make_cell("mlp-infer", Mode::kInfer, 4, 2)};
  OrchestratorOptions options;
  options.scheduling = GetParam();
  auto [outcome, sink] = run_everywhere(cells, options);
  if (world_rank() != 0) return;
  EXPECT_EQ(outcome.counts[CellStatus::kOk], 2u);
  EXPECT_EQ(outcome.counts[CellStatus::kFailed], 2u);
  EXPECT_EQ(outcome.counts[CellStatus::kOom], 1u);
  EXPECT_EQ(outcome.counts[CellStatus::kSkipped], 1u);
  const auto& thrown = sink.records.at(cells[0].cell_id);
  EXPECT_EQ(thrown.events, (std::vector<std::string>{"running", "finish:failed"}));
  EXPECT_EQ(thrown.phase, "forward");
  EXPECT_NE(thrown.reason.find("requested exception"), std::string::npos);
  const auto& failed = sink.records.at(cells[1].cell_id);
  EXPECT_EQ(failed.phase, "backward");
  EXPECT_EQ(failed.reason,
            "rank " + std::to_string(failed.ranks[0]) + ": fake runner: requested failure");
  EXPECT_EQ(sink.records.at(cells[2].cell_id).status, CellStatus::kOom);
  const auto& skipped = sink.records.at(cells[3].cell_id);
  EXPECT_EQ(skipped.events, (std::vector<std::string>{"skipped"}));
  EXPECT_NE(skipped.reason.find("needs 64 workers"), std::string::npos);
  expect_results_intact(cells[4], sink.records.at(cells[4].cell_id));
  expect_results_intact(cells[5], sink.records.at(cells[5].cell_id));
}

TEST(OrchestratorProtocolFailFast, StopsStartingCellsAfterTheFirstFailure) {
  const std::vector<CellSpec> cells{make_cell("mlp-throw", Mode::kTrain, 8, 1),
                                    make_cell("mlp-train", Mode::kTrain, 8, 1),
                                    make_cell("mlp-train", Mode::kTrain, 16, 1)};
  OrchestratorOptions options;
  options.scheduling = SchedulingMode::kExclusive;
  options.fail_fast = true;
  auto [outcome, sink] = run_everywhere(cells, options);
  if (world_rank() != 0) return;
  EXPECT_EQ(outcome.counts[CellStatus::kFailed], 1u);
  EXPECT_EQ(outcome.not_started, 2u);
  EXPECT_EQ(sink.records.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, OrchestratorProtocol,
                         testing::Values(SchedulingMode::kExclusive, SchedulingMode::kPacked),
                         [](const auto& info) { return to_string(info.param); });

TEST(GroupCreationTag, DistinctForDisjointGroupsAndAboveMessageTags) {
  EXPECT_EQ(group_creation_tag({1, 2}), 1001);
  EXPECT_NE(group_creation_tag({1, 2}), group_creation_tag({3, 4}));
  EXPECT_GT(group_creation_tag({}), static_cast<int>(Tag::kHello));
}

}  // namespace
}  // namespace scalebench
