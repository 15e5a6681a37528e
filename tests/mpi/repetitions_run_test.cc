// Issue 17 end to end with the real LibTorch runner (NP 3: rank 0 + 2 workers): 5 repetitions
// run in the seeded interleaved order and every one keeps its raw timings; the series
// figures are in the file; a world-size-2 training cell stores when each phase began on
// each rank (the per-rank timeline of `scalebench trace`), consistent with its timings;
// long cells report their progress to rank 0's log.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/base/exit_status.h"
#include "common/cell/repetition_stats.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "matrix/matrix.h"
#include "orchestrator/dispatch_order.h"
#include "protocol/mpi_comm.h"
#include "results/overview.h"
#include "results/reader.h"
#include "results/store.h"
#include "run_real_cli.h"
#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMatrix = R"(name: reps
defaults: {device: cpu, backend: mpi, warmup: 1, iterations: 6, timeout_s: 300, cpu_threads: 1,
           repetitions: 5}
experiments:
  - {name: ddp, model: mlp, input_shape: [64], num_classes: 4, modes: [train], batch_sizes: [8],
     world_sizes: [2]}
  - {name: serve, model: mlp, input_shape: [64], num_classes: 4, modes: [infer],
     batch_sizes: [8]}
)";

class RepetitionsRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Note [Cell progress]: report after every iteration, so that these short cells do.
    setenv("SCALEBENCH_PROGRESS_INTERVAL", "0.000001", 1);
    dir_ = new testing::TempDir();
    const auto run = testing_real::run_matrix(dir_->path(), kMatrix);
    root_ = run.root.string();
    status_ = run.status;
    unsetenv("SCALEBENCH_PROGRESS_INTERVAL");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path results() { return fs::path(root_) / "r.h5"; }

  static inline testing::TempDir* dir_ = nullptr;
  static inline std::string root_;
  static inline int status_ = -1;
};

TEST_F(RepetitionsRun, RunsEveryRepetitionInTheSeededOrder) {
  EXPECT_EQ(status_, kExitOk);
  if (world_rank() != 0) return;
  const auto overview = read_results_overview(results());
  const auto& cells = overview.at("cells");
  ASSERT_EQ(cells.size(), 10U);
  std::vector<std::pair<std::string, std::string>> started;  // (started_at, id)
  for (const auto& [id, cell] : cells.items()) {
    ASSERT_EQ(cell.at("status"), "ok") << cell.at("reason");
    const auto datasets = cell.at("datasets");
    EXPECT_NE(std::find(datasets.begin(), datasets.end(), "timings"), datasets.end());
    started.emplace_back(cell.at("started_at").get<std::string>(), id);
  }
  std::sort(started.begin(), started.end());
  // The order run is the seeded rounds of the matrix's cells (exclusive scheduling: one
  // at a time, so the dispatch times give the order).
  const auto matrix = load_matrix(fs::path(root_) / "m.yaml");
  std::vector<std::string> ids;
  for (const auto& cell : matrix.cells) ids.push_back(cell.cell_id);
  const uint64_t seed = default_order_seed(matrix_hash(ids));
  const auto expected = dispatch_order(matrix.cells, seed);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(started[i].second, expected[i].cell_id) << i;
  }
  EXPECT_EQ(overview.at("provenance").at("order_seed"), std::to_string(seed));
  EXPECT_EQ(overview.at("provenance").at("cell_count"), 10);
}

TEST_F(RepetitionsRun, StoresTheSeriesOfEachCell) {
  if (world_rank() != 0) return;
  const auto overview = read_results_overview(results());
  const auto expected = series_of_overview(overview);
  ASSERT_EQ(expected.size(), 2U);
  const Hdf5Handle file =
      own_file(HDF5_CHECK(H5Fopen(results().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  for (const auto& series : expected) {
    SCOPED_TRACE(series.series_id);
    const Hdf5Handle group =
        own_group(HDF5_CHECK(H5Gopen2(file, ("series/" + series.series_id).c_str(), H5P_DEFAULT)));
    const auto attributes = h5::read_all_attributes(group);
    EXPECT_EQ(attributes.at("completed"), 5);
    EXPECT_EQ(attributes.at("median_s").get<double>(), series.median_s);
    EXPECT_EQ(attributes.at("median_s_ci_low").get<double>(), series.median_interval.low);
    EXPECT_EQ(attributes.at("median_s_ci_high").get<double>(), series.median_interval.high);
    EXPECT_LE(series.median_interval.low, series.median_s);
    EXPECT_GE(series.median_interval.high, series.median_s);
    EXPECT_EQ(nlohmann::json::parse(attributes.at("cells").get<std::string>()).size(), 5U);
  }
}

TEST_F(RepetitionsRun, PhaseBeginsOfATwoRankCellAgreeWithItsTimings) {
  if (world_rank() != 0) return;
  const auto overview = read_results_overview(results());
  const Hdf5Handle file =
      own_file(HDF5_CHECK(H5Fopen(results().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  int checked = 0;
  for (const auto& [id, cell] : overview.at("cells").items()) {
    if (cell.at("spec").at("world_size") != 2) continue;
    SCOPED_TRACE(id);
    const Hdf5Handle group =
        own_group(HDF5_CHECK(H5Gopen2(file, ("cells/" + id).c_str(), H5P_DEFAULT)));
    const auto dims = h5::dataset_dims(group, "timings");
    ASSERT_EQ(h5::dataset_dims(group, "phase_starts"), dims);
    const auto timings = h5::read_double_dataset(group, "timings");
    const auto starts = h5::read_double_dataset(group, "phase_starts");
    const size_t rows = dims[1];
    const size_t phases = dims[2];
    std::vector<double> first_step(2);
    for (size_t r = 0; r < 2; ++r) {
      double previous_end = 0.0;
      for (size_t i = 0; i < rows; ++i) {
        const size_t row = (r * rows + i) * phases;
        const double step_begin = starts[row + phases - 1];  // `step` spans the iteration
        const double step_end = step_begin + timings[row + phases - 1];
        ASSERT_FALSE(std::isnan(step_begin));
        EXPECT_GE(step_begin, previous_end - 1e-9) << "iterations follow each other";
        for (size_t p = 0; p + 1 < phases; ++p) {
          if (std::isnan(starts[row + p])) continue;
          EXPECT_GE(starts[row + p], step_begin - 1e-9) << p;
          EXPECT_LE(starts[row + p] + timings[row + p], step_end + 1e-9) << p;
        }
        previous_end = step_end;
        if (i == 0) first_step[r] = step_begin;
      }
    }
    // The DDP buckets' allreduces: launched within the step, completed (the MPI backend's
    // communication thread) after the launch and before the step's comm_wait ended.
    const auto bucket_dims = h5::dataset_dims(group, "bucket_times");
    ASSERT_EQ(bucket_dims.size(), 4U);
    EXPECT_EQ(bucket_dims[0], 2U);
    EXPECT_EQ(bucket_dims[1], rows);
    const size_t buckets = bucket_dims[2];
    EXPECT_GE(buckets, 1U);
    const auto bucket_times = h5::read_double_dataset(group, "bucket_times");
    const auto phase_names = nlohmann::json::parse(h5::read_string_attribute(
        own_dataset(HDF5_CHECK(H5Dopen2(group, "timings", H5P_DEFAULT))), "phases"));
    const auto comm_wait = static_cast<size_t>(
        std::find(phase_names.begin(), phase_names.end(), "comm_wait") - phase_names.begin());
    ASSERT_LT(comm_wait, phases);
    for (size_t r = 0; r < 2; ++r) {
      for (size_t i = 0; i < rows; ++i) {
        const size_t row = (r * rows + i) * phases;
        const double step_begin = starts[row + phases - 1];
        const double comm_end = starts[row + comm_wait] + timings[row + comm_wait];
        for (size_t b = 0; b < buckets; ++b) {
          const double launched = bucket_times[((r * rows + i) * buckets + b) * 2];
          const double completed = bucket_times[((r * rows + i) * buckets + b) * 2 + 1];
          EXPECT_GE(launched, step_begin) << r << "," << i << "," << b;
          EXPECT_GE(completed, launched) << r << "," << i << "," << b;
          EXPECT_LE(completed, comm_end + 1e-6) << r << "," << i << "," << b;
        }
      }
    }
    // The origin is shared by a barrier: both ranks begin their first step close together
    // (loose bound: three processes share two cores here).
    EXPECT_LT(std::abs(first_step[0] - first_step[1]), 0.5);
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST_F(RepetitionsRun, LongCellsReportProgressToRankZerosLog) {
  if (world_rank() != 0) return;
  std::string logs;
  for (const auto& entry : fs::directory_iterator(fs::path(root_) / "logs")) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    logs += text.str();
  }
  // A report that arrives after its cell's result is dropped, so the last ones may be
  // missing; the first of the measured loop is not.
  EXPECT_NE(logs.find(": measured iteration 1 of 6"), std::string::npos) << logs.substr(0, 2000);
  EXPECT_NE(logs.find(": warmup iteration 1 of 1"), std::string::npos);
}

}  // namespace
}  // namespace scalebench
