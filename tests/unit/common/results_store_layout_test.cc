// Golden test of the results file layout: every object path and attribute name (with
// its type) of a file holding one finished, one skipped and one timed-out cell, compared
// with tests/data/results/layout_v1.txt. Cell ids are replaced by role names so the
// listing is about the layout. Regenerate with SCALEBENCH_UPDATE_GOLDEN=1 after an
// intended layout change (and update schemas/results-layout.md and its version).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "common/base/build_info.h"
#include "common/cell/accuracy.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "results/cell_summary.h"
#include "results/reader.h"
#include "results/store.h"
#include "results_store_test_util.h"

namespace scalebench {
namespace {

std::string type_name(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_STRING:
      return H5Tis_variable_str(type) > 0 ? "vlen-utf8-string" : "fixed-string";
    case H5T_INTEGER:
      return "int" + std::to_string(8 * H5Tget_size(type));
    case H5T_FLOAT:
      return "float" + std::to_string(8 * H5Tget_size(type));
    default:
      return "other";
  }
}

struct Listing {
  std::vector<std::string> lines;
  std::map<std::string, std::string> renames;  // cell id -> role
};

std::string renamed(std::string path, const std::map<std::string, std::string>& renames) {
  for (const auto& [id, role] : renames) {
    const auto at = path.find(id);
    if (at != std::string::npos) path.replace(at, id.size(), "<" + role + ">");
  }
  return path;
}

herr_t list_attribute(hid_t object, const char* name, const H5A_info_t*, void* client) {
  auto& out = *static_cast<std::pair<std::string, Listing*>*>(client);
  const Hdf5Handle attribute = own_attribute(HDF5_CHECK(H5Aopen(object, name, H5P_DEFAULT)));
  const Hdf5Handle type = own_datatype(HDF5_CHECK(H5Aget_type(attribute)));
  out.second->lines.push_back(out.first + " @" + name + " " + type_name(type));
  return 0;
}

herr_t list_object(hid_t root, const char* name, const H5O_info_t* info, void* client) {
  auto& listing = *static_cast<Listing*>(client);
  const std::string path = std::string(name) == "." ? "/" : "/" + std::string(name);
  const Hdf5Handle object = own_object(HDF5_CHECK(H5Oopen(root, name, H5P_DEFAULT)));
  std::string kind = "group";
  if (info->type == H5O_TYPE_DATASET) {
    const Hdf5Handle type = own_datatype(HDF5_CHECK(H5Dget_type(object)));
    const Hdf5Handle space = own_dataspace(HDF5_CHECK(H5Dget_space(object)));
    kind =
        "dataset " + type_name(type) + " rank " + std::to_string(H5Sget_simple_extent_ndims(space));
  }
  const std::string shown = renamed(path, listing.renames);
  listing.lines.push_back(shown + " " + kind);
  std::pair<std::string, Listing*> context{shown, &listing};
  hsize_t index = 0;
  HDF5_CHECK(H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, &index, list_attribute, &context));
  return 0;
}

std::string layout_listing(const std::filesystem::path& path,
                           const std::map<std::string, std::string>& renames) {
  const Hdf5Handle file = own_file(HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  Listing listing{{}, renames};
  HDF5_CHECK(H5Ovisit(file, H5_INDEX_NAME, H5_ITER_INC, list_object, &listing));
  std::sort(listing.lines.begin(), listing.lines.end());
  std::ostringstream out;
  for (const auto& line : listing.lines) out << line << "\n";
  return out.str();
}

TEST(ResultsLayout, MatchesGoldenListing) {
  testing_util::TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance("0123456789abcdef"), false);
  const CellSpec ok = testing_util::train_cell(1, 2, 1, 5);
  const CellSpec skipped = testing_util::train_cell(2);
  const CellSpec timeout = testing_util::train_cell(3);
  store.mark_running(ok, {1, 2});
  auto ranks = testing_util::full_results(ok);
  TrainingComparison comparison;  // Note [Accuracy validation]: the `accuracy` subgroup
  comparison.steps = 5;
  for (auto& rank : ranks) {
    rank.accuracy = finish_training(comparison, 0.01);
    // Note [Shared cell clock]: `phase_starts` and the origin on the system clock.
    rank.phase_starts_s.assign(rank.timings_s.size(), 0.5);
    rank.bucket_bytes = {1024, 4096};
    rank.bucket_times_s.assign(rank.iterations() * 2 * 2, 0.25);
    rank.metrics["loop_origin_epoch_s"] = 1.7e9;
  }
  store.complete_cell(ok, ranks);
  store.mark_skipped(skipped, "too large");
  store.mark_running(timeout, {1, 2});
  store.finish_cell_without_results(timeout, CellStatus::kTimeout, FailurePhase::kWatchdog,
                                    "timeout");
  // Note [Batch search]: a batch_size auto cell adds `probes`, `probe_times` and the figures.
  CellSpec searched = testing_util::train_cell(4, 2, 1, 5);
  searched.batch_size = kBatchAuto;
  searched = finalize_cell_id(searched);
  auto searched_ranks = testing_util::full_results(searched);
  for (auto& rank : searched_ranks) {
    rank.metrics["batch_size"] = 16;
    rank.metrics["memory_budget_bytes"] = 1e9;
    rank.phase_starts_s.assign(rank.timings_s.size(), 0.5);  // its final timed loop
    rank.probes = {{16, ProbeStatus::kOk, 0.01, 0.012, 3200, 4e8, {0.01, 0.012}},
                   {32, ProbeStatus::kOverBudget, 0.02, 0.022, 0, 1.2e9, {0.02, 0.022}}};
  }
  store.complete_cell(searched, searched_ranks);
  // Note [Cell progress]: a running cell's progress attributes.
  const CellSpec running = testing_util::train_cell(5);
  store.mark_running(running, {1, 2});
  store.record_progress(running, {running.cell_id, "measured", 3, 100});
  // Note [Repetitions]: a series group and the run's order seed; the writer's commit log.
  const std::string series = "5e1e5000000000aa";
  store.write_series(
      {summarize_series(series, "step", 2,
                        {{series, 0, true, 0.1, 10.0}, {"5e1e5000000000bb", 1, true, 0.11, 9.0}})});
  store.set_order_seed(42);
  store.set_commit_log("[[1.7e9,0.01,2]]");
  store.set_end_time("2024-01-02T05:00:00Z");

  const std::string actual = layout_listing(path, {{ok.cell_id, "ok-cell"},
                                                   {skipped.cell_id, "skipped-cell"},
                                                   {timeout.cell_id, "timeout-cell"},
                                                   {searched.cell_id, "auto-cell"},
                                                   {running.cell_id, "running-cell"},
                                                   {series, "series"}});
  const std::filesystem::path golden =
      scalebench::build_info::source_dir() / "tests" / "data" / "results" / "layout_v1.txt";
  if (const char* update = std::getenv("SCALEBENCH_UPDATE_GOLDEN"); update && *update == '1') {
    std::ofstream(golden) << actual;
  }
  std::ifstream in(golden);
  ASSERT_TRUE(in) << "missing " << golden << "; run with SCALEBENCH_UPDATE_GOLDEN=1";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(expected.str(), actual);
}

// Note [Accuracy validation]: the report of the group is stored once and reads back, the
// failed checks as a list; a cell without one reads as null; a retry drops the old one.
TEST(ResultsLayout, AccuracyReadsBack) {
  testing_util::TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance("0123456789abcdef"), false);
  const CellSpec checked = testing_util::train_cell(1, 2, 1, 5);
  const CellSpec unchecked = testing_util::train_cell(2, 2, 1, 5);
  OutputSums sums;
  sums.samples = 1;
  sums.elements = 4;
  sums.sum_abs = sums.sum_sq = 1;
  sums.dot = 34;
  sums.out_sq = 39;
  sums.ref_sq = 30;
  auto ranks = testing_util::full_results(checked);
  for (auto& rank : ranks) rank.accuracy = finish_inference(sums, 1.0, 4.0, 0.01);
  store.mark_running(checked, {1, 2});
  store.complete_cell(checked, ranks);
  store.mark_running(unchecked, {1, 2});
  store.complete_cell(unchecked, testing_util::full_results(unchecked));
  auto cells = read_results_overview(path).at("cells");
  const auto& accuracy = cells.at(checked.cell_id).at("accuracy");
  EXPECT_EQ(accuracy.at("verdict"), "failed");
  EXPECT_EQ(accuracy.at("failed_checks"), nlohmann::json::array({"mae_rel 0.08333 > 0.01"}));
  EXPECT_EQ(accuracy.at("elements"), 4);
  EXPECT_DOUBLE_EQ(accuracy.at("mae").get<double>(), 0.25);
  EXPECT_TRUE(cells.at(unchecked.cell_id).at("accuracy").is_null());
  store.mark_running(checked, {1, 2});  // a retry without validation keeps no old verdict
  store.complete_cell(checked, testing_util::full_results(checked));
  EXPECT_TRUE(read_results_overview(path).at("cells").at(checked.cell_id).at("accuracy").is_null());
}

// The summary stores the thresholds its validity flags were judged by: the constants of
// results/cell_summary.h, so that the file (and the analysis package) needs no copy of them.
TEST(ResultsLayout, SummaryStoresValidityThresholds) {
  testing_util::TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance("0123456789abcdef"), false);
  const CellSpec cell = testing_util::train_cell(1, 2, 1, 5);
  store.mark_running(cell, {1, 2});
  store.complete_cell(cell, testing_util::full_results(cell));
  const auto summary = read_results_overview(path)["cells"][cell.cell_id]["summary"];
  EXPECT_EQ(kMinValidIterations, summary["min_valid_iterations"].get<size_t>());
  EXPECT_EQ(kMaxValidCv, summary["max_valid_cv"].get<double>());
  EXPECT_EQ(kReplicaChecksumRelTolerance, summary["replica_checksum_rel_tolerance"].get<double>());
}

}  // namespace
}  // namespace scalebench
