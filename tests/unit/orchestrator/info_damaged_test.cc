// `scalebench info` on damaged files, and the top-level handler of every command (issue
// 15, finding 6): one line and the documented exit status, never an uncaught exception.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/base/exit_status.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "orchestrator/cli.h"
#include "orchestrator/summary_table.h"
#include "results/store.h"
#include "tests/unit/common/results_store_test_util.h"

namespace scalebench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::TempDir;

/// `scalebench info <args...>` in-process: exit status, stdout and stderr.
struct CliRun {
  int status = -1;
  std::string out;
  std::string err;
};

CliRun run_info(std::vector<std::string> args) {
  args.insert(args.begin(), {"scalebench", "info"});
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (auto& arg : args) argv.push_back(arg.data());
  CliRun run;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  run.status = run_cli(static_cast<int>(argv.size()), argv.data());
  run.out = ::testing::internal::GetCapturedStdout();
  run.err = ::testing::internal::GetCapturedStderr();
  return run;
}

/// A file with two ok cells; returns their ids.
std::vector<std::string> write_two_cells(const std::filesystem::path& path) {
  auto store = ResultsStore::create(path, testing_util::test_provenance("00112233aabbccdd"), false);
  std::vector<std::string> ids;
  for (uint64_t seed : {1, 2}) {
    const CellSpec cell = testing_util::train_cell(seed);
    store.mark_running(cell, {1, 2});
    store.complete_cell(cell, testing_util::full_results(cell));
    ids.push_back(cell.cell_id);
  }
  return ids;
}

void edit(const std::filesystem::path& path, const std::function<void(hid_t)>& change) {
  silence_hdf5_error_printing();
  Hdf5Handle file = own_file(HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
  change(file);
  file.close();
}

// Before: an uncaught exception, exit 134.
TEST(InfoDamaged, LayoutAttributeNotAStringExitsTwoWithOneLine) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  write_two_cells(path);
  edit(path, [](hid_t file) { h5::write_int64_attribute(file, "scalebench_layout_version", 1); });
  const CliRun run = run_info({path.string()});
  EXPECT_EQ(kExitBadInput, run.status);
  EXPECT_THAT(run.err, HasSubstr("is not a string"));
  EXPECT_EQ(1, std::count(run.err.begin(), run.err.end(), '\n')) << run.err;
}

// Before: spec not JSON showed the cell with batch 0 (status ok); a dangling link refused
// the whole file with exit 4.
TEST(InfoDamaged, DamagedCellIsOneLineAndTheOthersAreShown) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  const auto ids = write_two_cells(path);
  edit(path, [&](hid_t file) {
    const Hdf5Handle cell =
        own_group(HDF5_CHECK(H5Gopen2(file, ("cells/" + ids[0]).c_str(), H5P_DEFAULT)));
    h5::write_string_attribute(cell, "spec", "{not json");
    HDF5_CHECK(H5Lcreate_soft("/nowhere", cell, "dangling", H5P_DEFAULT, H5P_DEFAULT));
  });
  const CliRun table = run_info({path.string()});
  EXPECT_EQ(kExitCellsFailed, table.status) << table.err;
  EXPECT_THAT(table.out, HasSubstr("# damaged cell " + ids[0] + ": attribute 'spec'"));
  EXPECT_THAT(table.out, HasSubstr("# Cells: 1, 1 ok"));
  const CliRun json = run_info({path.string(), "--format", "json"});
  EXPECT_EQ(kExitCellsFailed, json.status);
  const auto parsed = nlohmann::json::parse(json.out);
  ASSERT_EQ(1U, parsed["damaged_cells"].size());
  EXPECT_EQ(ids[0], parsed["damaged_cells"][0]["cell_id"]);
  ASSERT_EQ(1U, parsed["cells"].size());
  EXPECT_EQ(ids[1], parsed["cells"][0]["cell_id"]);
}

// Before: HDF5's error stack and exit 4.
TEST(InfoDamaged, TruncatedFileExitsTwoWithOneLine) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  write_two_cells(path);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  const CliRun run = run_info({path.string()});
  EXPECT_EQ(kExitBadInput, run.status) << run.err;
  EXPECT_THAT(run.err, HasSubstr("is damaged"));
  EXPECT_EQ(1, std::count(run.err.begin(), run.err.end(), '\n')) << run.err;
}

TEST(ReportError, MapsEveryExceptionToOneLineAndItsStatus) {
  struct Case {
    std::exception_ptr error;
    int status;
    const char* phrase;
  };
  const Case cases[] = {
      {std::make_exception_ptr(InputError("bad matrix")), kExitBadInput, "bad matrix"},
      {std::make_exception_ptr(Hdf5Error("h5 broke")), kExitInfrastructure, "scalebench: h5 broke"},
      {std::make_exception_ptr(
           std::filesystem::filesystem_error("cannot create directories", "/proc/x",
                                             std::make_error_code(std::errc::permission_denied))),
       kExitBadInput, "/proc/x"},
      {std::make_exception_ptr(std::bad_alloc()), kExitInfrastructure, "out of memory"},
      {std::make_exception_ptr(std::out_of_range("map::at")), kExitInfrastructure,
       "internal error: map::at"},
      {std::make_exception_ptr(42), kExitInfrastructure, "unknown exception"},
  };
  for (const auto& c : cases) {
    std::ostringstream out;
    EXPECT_EQ(c.status, report_error(c.error, out)) << c.phrase;
    const std::string text = out.str();
    EXPECT_THAT(text, HasSubstr(c.phrase));
    EXPECT_EQ(1, std::count(text.begin(), text.end(), '\n')) << text;
  }
}

TEST(SummaryRows, IllTypedSpecFieldsGiveZeroNotAnException) {
  const nlohmann::json overview = {
      {"cells",
       {{"a", {{"spec", {{"batch_size", "sixteen"}, {"world_size", 2.5}}}, {"status", "ok"}}}}}};
  const auto rows = summary_rows(overview);
  ASSERT_EQ(1U, rows.size());
  EXPECT_EQ(0, rows[0].batch_size);
  EXPECT_EQ(0, rows[0].world_size);
}

}  // namespace
}  // namespace scalebench
