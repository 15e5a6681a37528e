// ResultsStore: create, mark, complete, read back, refusals, resume.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "results/cell_summary.h"
#include "results/reader.h"
#include "results/store.h"
#include "results_store_test_util.h"

namespace scalebench {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;

constexpr const char* kHash = "00112233aabbccdd";

Hdf5Handle open_read_only(const std::filesystem::path& path) {
  return own_file(HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
}

Hdf5Handle open_cell(hid_t file, const std::string& id) {
  return own_group(HDF5_CHECK(H5Gopen2(file, ("cells/" + id).c_str(), H5P_DEFAULT)));
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError>";
}

TEST(ResultsStore, CreateWritesProvenanceAndEmptyCells) {
  TempDir dir;
  const auto path = dir.path() / "sub" / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  EXPECT_EQ(path, store.path());
  EXPECT_TRUE(store.cells().empty());
  const auto overview = read_results_overview(path);
  const auto& p = overview["provenance"];
  EXPECT_EQ(kResultsLayoutVersion, overview["layout_version"]);
  EXPECT_EQ(kResultsLayoutVersion, p["scalebench_layout_version"]);
  EXPECT_EQ(kHash, p["matrix_hash"]);
  EXPECT_EQ(1, p["run_count"]);
  EXPECT_EQ("", p["end_time"]);
  EXPECT_EQ("2024-01-02T03:04:05Z", p["start_time"]);
  EXPECT_EQ(3, p["mpi_size"]);
  EXPECT_EQ("experiments: {}\n", p["matrix_text"]);
  EXPECT_EQ(nlohmann::json({"host0"}), p["hosts"]);
  EXPECT_EQ("cpu", p["devices"][0]["device"]);
  EXPECT_EQ("matrix.yaml", p["argv"][2]);
  EXPECT_TRUE(p["environment"].is_object());
  EXPECT_TRUE(p["tool_dirty"].is_number_integer());
  EXPECT_TRUE(overview["cells"].empty());
}

TEST(ResultsStore, MarkRunningThenCompleteReadsBack) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  const CellSpec cell = testing_util::train_cell(7, 2, 2, 6);
  store.mark_running(cell, {3, 4});
  {
    const auto cells = store.cells();
    ASSERT_EQ(1u, cells.size());
    EXPECT_EQ(CellStatus::kRunning, cells.at(cell.cell_id).status);
    EXPECT_EQ(to_json(cell).dump(), cells.at(cell.cell_id).spec_json);
    const auto overview = read_results_overview(path)["cells"][cell.cell_id];
    EXPECT_TRUE(overview["datasets"].empty());
    EXPECT_TRUE(overview["summary"].is_null());
    EXPECT_EQ("", overview["finished_at"]);
    EXPECT_NE("", overview["started_at"]);
  }
  // Rank 1 returned fewer rows: its tail must be NaN.
  std::vector<RankResult> ranks = {testing_util::rank_result(cell, 0, 8),
                                   testing_util::rank_result(cell, 1, 5)};
  ranks[1].metrics.erase("final_loss");
  ranks[1].metrics["loop_wall_s"] = 3.5;
  store.complete_cell(cell, ranks);

  const Hdf5Handle file = open_read_only(path);
  const Hdf5Handle group = open_cell(file, cell.cell_id);
  EXPECT_EQ("ok", h5::read_string_attribute(group, "status"));
  EXPECT_EQ("", h5::read_string_attribute(group, "reason"));
  EXPECT_EQ("[1,2]", h5::read_string_attribute(group, "ranks"));  // world ranks of the results
  EXPECT_EQ("mlp", h5::read_string_attribute(group, "model"));
  EXPECT_EQ(16, h5::read_int64_attribute(group, "batch_size"));
  EXPECT_EQ(7, h5::read_int64_attribute(group, "seed"));

  EXPECT_EQ((std::vector<hsize_t>{2, 8, 7}), h5::dataset_dims(group, "timings"));
  const auto timings = h5::read_double_dataset(group, "timings");
  for (size_t i = 0; i < 8; ++i) {
    for (size_t p = 0; p < 7; ++p) {
      EXPECT_EQ(testing_util::fake_time_s(7, 0, i, p), timings[(0 * 8 + i) * 7 + p]);
      const double r1 = timings[(1 * 8 + i) * 7 + p];
      if (i < 5)
        EXPECT_EQ(testing_util::fake_time_s(7, 1, i, p), r1);
      else
        EXPECT_TRUE(std::isnan(r1)) << i << "," << p;
    }
  }
  const Hdf5Handle dataset = own_dataset(HDF5_CHECK(H5Dopen2(group, "timings", H5P_DEFAULT)));
  EXPECT_EQ(nlohmann::json(testing_util::train_phases()).dump(),
            h5::read_string_attribute(dataset, "phases"));
  EXPECT_EQ(2, h5::read_int64_attribute(dataset, "warmup_iterations"));
  EXPECT_EQ("[8,5]", h5::read_string_attribute(dataset, "iterations_per_rank"));
  const Hdf5Handle create = own_plist(HDF5_CHECK(H5Dget_create_plist(dataset)));
  EXPECT_EQ(H5D_CHUNKED, H5Pget_layout(create));
  EXPECT_GE(H5Pget_nfilters(create), 1);

  EXPECT_EQ((std::vector<hsize_t>{2, 4}), h5::dataset_dims(group, "rank_metrics"));
  const auto metrics = h5::read_double_dataset(group, "rank_metrics");
  const Hdf5Handle metrics_set =
      own_dataset(HDF5_CHECK(H5Dopen2(group, "rank_metrics", H5P_DEFAULT)));
  EXPECT_EQ(R"(["final_loss","loop_wall_s","param_checksum","peak_rss_bytes"])",
            h5::read_string_attribute(metrics_set, "names"));
  EXPECT_EQ(0.25, metrics[0]);
  EXPECT_TRUE(std::isnan(metrics[1]));  // rank 0 has no loop_wall_s
  EXPECT_TRUE(std::isnan(metrics[4]));  // rank 1 has no final_loss
  EXPECT_EQ(3.5, metrics[5]);
  EXPECT_EQ((std::vector<std::string>{"host0", "host0"}),
            h5::read_string_dataset(group, "rank_hosts"));
  EXPECT_EQ((std::vector<std::string>{"cpu", "cpu"}),
            h5::read_string_dataset(group, "rank_devices"));

  const CellSummary expected = summarize_cell(cell, ranks);
  const auto summary = read_results_overview(path)["cells"][cell.cell_id]["summary"];
  EXPECT_EQ("step", summary["metric"]);
  EXPECT_EQ(expected.time.count, summary["count"].get<size_t>());
  EXPECT_EQ(expected.time.median, summary["median_s"].get<double>());
  EXPECT_EQ(expected.time.p99, summary["p99_s"].get<double>());
  EXPECT_EQ(expected.throughput_samples_per_s, summary["throughput_samples_per_s"].get<double>());
  EXPECT_EQ(expected.phase_median_s.at("comm_wait"),
            summary["phase_median_s_comm_wait"].get<double>());
  EXPECT_EQ(2e6, summary["peak_memory_bytes"].get<double>());
  EXPECT_EQ(expected.valid ? 1 : 0, summary["valid"].get<int>());
  EXPECT_EQ(expected.valid_enough_iterations ? 1 : 0,
            summary["valid_enough_iterations"].get<int>());
  EXPECT_EQ(expected.valid_cv ? 1 : 0, summary["valid_cv"].get<int>());
  EXPECT_EQ(1, summary["valid_replicas_in_sync"].get<int>());
}

TEST(ResultsStore, PhaseStartsShareTheTimingsLayout) {
  // Note [Shared cell clock]: written when a rank recorded them, NaN-padded like timings;
  // a rank without them (a fake or older worker) leaves NaN rows.
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  const CellSpec cell = testing_util::train_cell(3, 2, 1, 3);
  std::vector<RankResult> ranks = {testing_util::rank_result(cell, 0, 4),
                                   testing_util::rank_result(cell, 1, 3)};
  for (size_t i = 0; i < ranks[0].timings_s.size(); ++i) {
    ranks[0].phase_starts_s.push_back(0.5 + static_cast<double>(i));
  }
  store.complete_cell(cell, ranks);
  const Hdf5Handle file = open_read_only(path);
  const Hdf5Handle group = open_cell(file, cell.cell_id);
  ASSERT_EQ((std::vector<hsize_t>{2, 4, 7}), h5::dataset_dims(group, "phase_starts"));
  const auto starts = h5::read_double_dataset(group, "phase_starts");
  for (size_t i = 0; i < 4 * 7; ++i) {
    EXPECT_EQ(0.5 + static_cast<double>(i), starts[i]);
    EXPECT_TRUE(std::isnan(starts[4 * 7 + i]));
  }
  const Hdf5Handle dataset = own_dataset(HDF5_CHECK(H5Dopen2(group, "phase_starts", H5P_DEFAULT)));
  EXPECT_EQ(nlohmann::json(testing_util::train_phases()).dump(),
            h5::read_string_attribute(dataset, "phases"));
  // Without any rank's begin times there is no dataset.
  const CellSpec other = testing_util::train_cell(4, 1, 1, 3);
  store.complete_cell(other, {testing_util::rank_result(other, 0, 4)});
  const Hdf5Handle file2 = open_read_only(path);
  EXPECT_FALSE(h5::has_link(open_cell(file2, other.cell_id), "phase_starts"));
}

TEST(ResultsStore, ProgressLastsWhileTheCellRuns) {
  // Note [Cell progress]
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  const CellSpec cell = testing_util::train_cell(5, 1, 1, 3);
  store.mark_running(cell, {1});
  store.record_progress(cell, {cell.cell_id, "measured", 40, 100}, "2026-01-01T00:00:00.500Z");
  auto overview = read_results_overview(path)["cells"][cell.cell_id];
  EXPECT_EQ("measured", overview["progress_stage"]);
  EXPECT_EQ(40, overview["progress_done"]);
  EXPECT_EQ(100, overview["progress_total"]);
  EXPECT_EQ("2026-01-01T00:00:00.500Z", overview["progress_at"]);
  store.complete_cell(cell, {testing_util::rank_result(cell, 0, 4)});
  overview = read_results_overview(path)["cells"][cell.cell_id];
  EXPECT_FALSE(overview.contains("progress_stage"));
  EXPECT_FALSE(overview.contains("progress_done"));
}

TEST(ResultsStore, SeriesAndRunAttributesReadBack) {
  // Note [Repetitions]: /series/<id>, and the root order_seed and commit_log.
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  const SeriesSummary series = summarize_series("aaaabbbbccccdddd", "step", 3,
                                                {{"aaaabbbbccccdddd", 0, true, 0.10, 100.0},
                                                 {"x1", 1, true, 0.12, 80.0},
                                                 {"x2", 2, false, NAN, NAN}});
  store.write_series({series});
  store.write_series({series});  // replaced, not an error
  store.set_order_seed(18446744073709551615ULL);
  store.set_commit_log("[[1.5,0.25,3]]");
  const Hdf5Handle file = open_read_only(path);
  const Hdf5Handle group =
      own_group(HDF5_CHECK(H5Gopen2(file, "series/aaaabbbbccccdddd", H5P_DEFAULT)));
  EXPECT_EQ(R"(["aaaabbbbccccdddd","x1","x2"])", h5::read_string_attribute(group, "cells"));
  EXPECT_EQ("[0.1,0.12,null]", h5::read_string_attribute(group, "repetition_median_s"));
  EXPECT_EQ(2, h5::read_int64_attribute(group, "completed"));
  EXPECT_EQ(3, h5::read_int64_attribute(group, "repetitions"));
  EXPECT_EQ("step", h5::read_string_attribute(group, "metric"));
  const auto attributes = h5::read_all_attributes(group);
  EXPECT_DOUBLE_EQ(0.11, attributes["median_s"].get<double>());
  EXPECT_EQ(series.median_interval.low, attributes["median_s_ci_low"].get<double>());
  EXPECT_EQ(series.median_interval.high, attributes["median_s_ci_high"].get<double>());
  EXPECT_EQ(series.throughput_interval.low, attributes["throughput_ci_low"].get<double>());
  EXPECT_EQ(1, attributes["disagree"].get<int>());  // 0.02 / 0.11 > 0.10
  EXPECT_EQ(std::to_string(fnv1a64("aaaabbbbccccdddd")),
            h5::read_string_attribute(group, "bootstrap_seed"));
  EXPECT_EQ(10000, h5::read_int64_attribute(group, "bootstrap_resamples"));
  EXPECT_EQ("18446744073709551615", h5::read_string_attribute(file, "order_seed"));
  EXPECT_EQ("[[1.5,0.25,3]]", h5::read_string_attribute(file, "commit_log"));
  EXPECT_EQ(0, h5::read_int64_attribute(file, "cell_count"));  // test_provenance: no cells
}

TEST(ResultsStore, FailedRankDecidesStatus) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  const CellSpec cell = testing_util::train_cell(8, 3, 1, 5);
  auto ranks = testing_util::full_results(cell);
  ranks[1].status = CellStatus::kOom;
  ranks[1].failed_phase = FailurePhase::kBackward;
  ranks[1].reason = "CUDA out of memory";
  ranks[2].status = CellStatus::kFailed;
  ranks[2].failed_phase = FailurePhase::kCommunication;
  ranks[2].reason = "peer failed";
  store.complete_cell(cell, ranks);
  const StoredCell stored = store.cells().at(cell.cell_id);
  EXPECT_EQ(CellStatus::kOom, stored.status);
  EXPECT_EQ("backward", stored.failed_phase);
  // The one cell_outcome rule: the first non-ok rank, named in the reason.
  EXPECT_EQ("rank " + std::to_string(ranks[1].world_rank) + ": CUDA out of memory", stored.reason);
  EXPECT_THROW(store.complete_cell(cell, {}), Error);
}

TEST(ResultsStore, SkippedAndWithoutResults) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  const CellSpec done = testing_util::train_cell(1, 2, 1, 5);
  const CellSpec skipped = testing_util::train_cell(2);
  store.complete_cell(done, testing_util::full_results(done));
  store.mark_skipped(skipped, "needs 2 workers, the job has 1");
  // A finished cell later recorded as timed out loses its stale datasets.
  store.finish_cell_without_results(done, CellStatus::kTimeout, FailurePhase::kWatchdog,
                                    "timeout after 600 s");
  const auto cells = read_results_overview(path)["cells"];
  EXPECT_EQ("skipped", cells[skipped.cell_id]["status"]);
  EXPECT_EQ("needs 2 workers, the job has 1", cells[skipped.cell_id]["reason"]);
  EXPECT_EQ(nlohmann::json::array(), cells[skipped.cell_id]["ranks"]);
  EXPECT_EQ("timeout", cells[done.cell_id]["status"]);
  EXPECT_EQ("watchdog", cells[done.cell_id]["failed_phase"]);
  EXPECT_TRUE(cells[done.cell_id]["datasets"].empty());
  EXPECT_TRUE(cells[done.cell_id]["summary"].is_null());
  EXPECT_EQ(cells[done.cell_id]["spec"], to_json(done));
}

TEST(ResultsStore, RefusesToOverwriteWithoutForce) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  {
    auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
    store.mark_skipped(testing_util::train_cell(1), "x");
  }
  EXPECT_EQ(
      "results file " + path.string() +
          " exists; pass --force to overwrite or --resume to continue",
      error_of([&] { ResultsStore::create(path, testing_util::test_provenance(kHash), false); }));
  EXPECT_EQ(1u, ResultsStore::open_for_resume(path, kHash).cells().size());  // untouched
  auto fresh = ResultsStore::create(path, testing_util::test_provenance("ffff"), true);
  EXPECT_TRUE(fresh.cells().empty());
  EXPECT_EQ("ffff", read_results_overview(path)["provenance"]["matrix_hash"]);
}

TEST(ResultsStore, ResumeChecksHashAndCountsRuns) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  {
    auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
    store.set_end_time("2024-01-02T04:00:00Z");
    EXPECT_EQ("2024-01-02T04:00:00Z", read_results_overview(path)["provenance"]["end_time"]);
  }
  const std::string changed =
      error_of([&] { ResultsStore::open_for_resume(path, "0000000000000000"); });
  EXPECT_THAT(changed, HasSubstr("another matrix"));
  EXPECT_THAT(changed, HasSubstr(kHash));
  EXPECT_THAT(changed, HasSubstr("--force"));
  EXPECT_EQ(1, read_results_overview(path)["provenance"]["run_count"]);
  ResultsStore::open_for_resume(path, kHash);
  auto store = ResultsStore::open_for_resume(path, kHash);
  const auto p = read_results_overview(path)["provenance"];
  EXPECT_EQ(3, p["run_count"]);
  EXPECT_EQ("", p["end_time"]);
}

TEST(ResultsStore, RefusesOtherLayoutMajorAndForeignFiles) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  {
    const Hdf5Handle file = own_file(HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
    h5::write_string_attribute(file, "scalebench_layout_version", "2.3");
  }
  EXPECT_THAT(error_of([&] { ResultsStore::open_for_resume(path, kHash); }),
              HasSubstr("required 1, found 2"));
  EXPECT_THAT(error_of([&] { read_results_overview(path); }), HasSubstr("required 1, found 2"));

  const auto text = dir.path() / "notes.h5";
  std::ofstream(text) << "not hdf5";
  EXPECT_THAT(error_of([&] { ResultsStore::open_for_resume(text, kHash); }),
              HasSubstr("is not an HDF5 file"));
  EXPECT_THAT(error_of([&] { ResultsStore::open_for_resume(dir.path() / "none.h5", kHash); }),
              HasSubstr("does not exist"));

  const auto foreign = dir.path() / "foreign.h5";
  own_file(HDF5_CHECK(H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
  EXPECT_THAT(error_of([&] { ResultsStore::open_for_resume(foreign, kHash); }),
              HasSubstr("not a scalebench results file"));
}

TEST(ResultsStore, BatchCommitsAllOrNothing) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  const CellSpec a = testing_util::train_cell(1);
  const CellSpec b = testing_util::train_cell(2);
  store.batch([&] {
    store.mark_skipped(a, "a");
    store.mark_skipped(b, "b");
    EXPECT_TRUE(store.cells().empty());  // committed state only
  });
  EXPECT_EQ(2u, store.cells().size());
  const CellSpec c = testing_util::train_cell(3);
  EXPECT_THROW(store.batch([&] {
    store.mark_skipped(c, "c");
    throw InputError("stop");
  }),
               InputError);
  EXPECT_EQ(2u, store.cells().size());
  EXPECT_EQ(1u, std::distance(std::filesystem::directory_iterator(dir.path()),
                              std::filesystem::directory_iterator()));  // no temp left behind
}

TEST(ResultsStore, RemovesStaleTempFilesOfDeadProcesses) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_EQ(child, waitpid(child, nullptr, 0));  // now a pid of no live process
  const auto stale = dir.path() / ("r.h5.tmp-" + std::to_string(child));
  const auto live = dir.path() / ("r.h5.tmp-" + std::to_string(getppid()));
  std::ofstream(stale) << "half-written";
  std::ofstream(live) << "another live writer";
  // A killed writer that nobody reaped yet (a zombie: kill(pid, 0) still succeeds) is dead.
  const pid_t zombie = fork();
  if (zombie == 0) _exit(0);
  const auto of_zombie = dir.path() / ("r.h5.tmp-" + std::to_string(zombie));
  std::ofstream(of_zombie) << "half-written by a SIGKILLed rank 0";
  siginfo_t exited{};
  ASSERT_EQ(0, waitid(P_PID, static_cast<id_t>(zombie), &exited, WEXITED | WNOWAIT));
  ResultsStore::open_for_resume(path, kHash);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_FALSE(std::filesystem::exists(of_zombie));
  EXPECT_TRUE(std::filesystem::exists(live));
  ASSERT_EQ(zombie, waitpid(zombie, nullptr, 0));
}

TEST(Hdf5Check, ThrowsWithHdf5StackAndExpression) {
  silence_hdf5_error_printing();
  try {
    HDF5_CHECK(H5Fopen("/nonexistent/dir/x.h5", H5F_ACC_RDONLY, H5P_DEFAULT));
    FAIL() << "no throw";
  } catch (const Hdf5Error& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("HDF5 error: H5Fopen(\"/nonexistent/dir/x.h5\""));
    EXPECT_THAT(what, HasSubstr("H5Fopen()"));
    EXPECT_THAT(what, HasSubstr("results_store_test.cc:"));
    EXPECT_EQ("HDF5", e.library());
  }
  EXPECT_EQ(3, HDF5_CHECK(3));  // yields the value
}

}  // namespace
}  // namespace scalebench
