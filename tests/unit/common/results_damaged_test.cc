// Damaged results files (issue 15, finding 6): read_results_overview confines damage to
// the cell it is in, refuses a file it cannot open with one line (InputError, exit 2), and
// `--resume` (ResultsStore::open_for_resume) never writes to a file it cannot read whole.
// See Note [Reading damaged files] in results/reader.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <functional>

#include "common/base/build_info.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "results/reader.h"
#include "results/store.h"
#include "results_store_test_util.h"

namespace scalebench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::TempDir;

constexpr const char* kHash = "00112233aabbccdd";

/// A finished file with two ok cells; returns their ids.
std::vector<std::string> write_two_cells(const std::filesystem::path& path) {
  auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  std::vector<std::string> ids;
  for (uint64_t seed : {1, 2}) {
    const CellSpec cell = testing_util::train_cell(seed);
    store.mark_running(cell, {1, 2});
    store.complete_cell(cell, testing_util::full_results(cell));
    ids.push_back(cell.cell_id);
  }
  store.set_end_time("2024-01-02T04:00:00Z");
  return ids;
}

/// Opens `path` read-write (plain HDF5, as a careless tool would) and runs `damage` on it.
void damage_file(const std::filesystem::path& path, const std::function<void(hid_t)>& damage) {
  silence_hdf5_error_printing();
  Hdf5Handle file = own_file(HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
  damage(file);
  file.close();
}

Hdf5Handle cell_group(hid_t file, const std::string& id) {
  return own_group(HDF5_CHECK(H5Gopen2(file, ("cells/" + id).c_str(), H5P_DEFAULT)));
}

/// Replaces attribute `name` of `object` by a 1-D array of three strings.
void write_string_array_attribute(hid_t object, const std::string& name) {
  HDF5_CHECK(H5Adelete(object, name.c_str()));
  const hsize_t dims[1] = {3};
  const Hdf5Handle space = own_dataspace(HDF5_CHECK(H5Screate_simple(1, dims, nullptr)));
  const Hdf5Handle type = h5::utf8_string_type();
  const Hdf5Handle attribute = own_attribute(
      HDF5_CHECK(H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT)));
  const char* values[3] = {"ok", "ok", "ok"};
  HDF5_CHECK(H5Awrite(attribute, type, static_cast<const void*>(values)));
}

std::string input_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not an InputError: ") + e.what() + ">";
  }
  return "<no exception>";
}

struct CellDamageCase {
  const char* name;
  std::function<void(hid_t cell)> damage;
  const char* problem;
};

std::ostream& operator<<(std::ostream& out, const CellDamageCase& c) { return out << c.name; }

const CellDamageCase kCellDamage[] = {
    {"spec_not_json", [](hid_t cell) { h5::write_string_attribute(cell, "spec", "{not json"); },
     "attribute 'spec' is not valid JSON"},
    {"spec_without_batch",
     [](hid_t cell) { h5::write_string_attribute(cell, "spec", R"({"experiment":"x"})"); },
     "attribute 'spec' is not a cell's spec"},
    {"status_unknown", [](hid_t cell) { h5::write_string_attribute(cell, "status", "exploded"); },
     "status 'exploded' is not one of"},
    {"status_not_string", [](hid_t cell) { h5::write_int64_attribute(cell, "status", 7); },
     "attribute 'status' is not a string"},
    {"status_string_array", [](hid_t cell) { write_string_array_attribute(cell, "status"); },
     "attribute 'status' cannot be read"},
    {"timings_dangling_link",
     [](hid_t cell) {
       HDF5_CHECK(H5Ldelete(cell, "timings", H5P_DEFAULT));
       HDF5_CHECK(H5Lcreate_soft("/nowhere", cell, "timings", H5P_DEFAULT, H5P_DEFAULT));
     },
     "'timings' cannot be read"},
    {"spec_of_another_cell",
     [](hid_t cell) {
       h5::write_string_attribute(cell, "spec", to_json(testing_util::train_cell(99)).dump());
     },
     "belongs to cell"},
};

class DamagedCell : public ::testing::TestWithParam<CellDamageCase> {};

// Before: info refused the whole file (exit 4) or aborted, or showed the cell with batch 0
// and status ok. Now: the cell is listed as damaged, the other one is read.
TEST_P(DamagedCell, IsListedByIdAndTheOthersAreRead) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  const auto ids = write_two_cells(path);
  damage_file(path, [&](hid_t file) { GetParam().damage(cell_group(file, ids[0])); });
  const nlohmann::json overview = read_results_overview(path);
  ASSERT_TRUE(overview["damaged_cells"].contains(ids[0])) << overview["damaged_cells"].dump();
  EXPECT_THAT(overview["damaged_cells"][ids[0]].get<std::string>(), HasSubstr(GetParam().problem));
  EXPECT_FALSE(overview["cells"].contains(ids[0]));
  ASSERT_TRUE(overview["cells"].contains(ids[1]));
  EXPECT_EQ("ok", overview["cells"][ids[1]]["status"]);
  EXPECT_EQ(16, overview["cells"][ids[1]]["spec"]["batch_size"]);
  EXPECT_THAT(describe_damage(overview), HasSubstr("cell " + ids[0]));
}

// Before: --resume incremented run_count and cleared end_time, then failed to read the
// file (or counted the damaged cell as done).
TEST_P(DamagedCell, ResumeRefusesBeforeWriting) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  const auto ids = write_two_cells(path);
  damage_file(path, [&](hid_t file) { GetParam().damage(cell_group(file, ids[0])); });
  const std::string error = input_error_of([&] { ResultsStore::open_for_resume(path, kHash); });
  EXPECT_THAT(error, HasSubstr("cannot resume"));
  EXPECT_THAT(error, HasSubstr(ids[0]));
  EXPECT_THAT(error, HasSubstr("nothing was written"));
  const auto provenance = read_results_overview(path)["provenance"];
  EXPECT_EQ(1, provenance["run_count"]);
  EXPECT_EQ("2024-01-02T04:00:00Z", provenance["end_time"]);
}

INSTANTIATE_TEST_SUITE_P(Kinds, DamagedCell, ::testing::ValuesIn(kCellDamage),
                         [](const ::testing::TestParamInfo<CellDamageCase>& info) {
                           return std::string(info.param.name);
                         });

// Before: an uncaught nlohmann type_error (info aborted with exit 134).
TEST(DamagedFile, LayoutVersionNotAStringIsAnInputError) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  write_two_cells(path);
  damage_file(path,
              [](hid_t file) { h5::write_int64_attribute(file, "scalebench_layout_version", 1); });
  EXPECT_THAT(input_error_of([&] { read_results_overview(path); }),
              HasSubstr("scalebench_layout_version is not a string"));
  EXPECT_THAT(input_error_of([&] { ResultsStore::open_for_resume(path, kHash); }),
              HasSubstr("scalebench_layout_version is not a string"));
}

// Before: the layout attribute as an array of strings was read into one pointer's room.
TEST(DamagedFile, LayoutVersionStringArrayIsRefused) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  write_two_cells(path);
  damage_file(path,
              [](hid_t file) { write_string_array_attribute(file, "scalebench_layout_version"); });
  EXPECT_THAT(input_error_of([&] { read_results_overview(path); }),
              HasSubstr("scalebench_layout_version cannot be read"));
}

TEST(DamagedFile, UnreadableRootAttributeIsAProblemNotARefusal) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  const auto ids = write_two_cells(path);
  damage_file(path, [](hid_t file) { write_string_array_attribute(file, "matrix_path"); });
  const auto overview = read_results_overview(path);
  EXPECT_EQ(2U, overview["cells"].size());
  EXPECT_THAT(overview["problems"].dump(),
              HasSubstr("root attribute 'matrix_path' cannot be read"));
  EXPECT_THAT(input_error_of([&] { ResultsStore::open_for_resume(path, kHash); }),
              HasSubstr("cannot resume"));
}

// Before: Hdf5Error with HDF5's whole error stack, exit 4.
TEST(DamagedFile, TruncatedFileIsOneLineInputError) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  write_two_cells(path);
  const auto size = std::filesystem::file_size(path);
  for (const auto kept : {size / 2, size - 1, static_cast<std::uintmax_t>(512)}) {
    const auto cut = dir.path() / ("cut-" + std::to_string(kept) + ".h5");
    std::filesystem::copy_file(path, cut);
    std::filesystem::resize_file(cut, kept);
    std::string error;
    try {
      const auto overview = read_results_overview(cut);
      // A cut that spares the superblock and /cells may still open: the damage is per cell.
      error = describe_damage(overview);
    } catch (const InputError& e) {
      error = e.what();
      EXPECT_THAT(error, HasSubstr("is damaged")) << kept;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not an InputError at " << kept << " bytes: " << e.what();
    }
    EXPECT_THAT(error, Not(HasSubstr("\n"))) << kept;
    EXPECT_THAT(error, Not(HasSubstr("H5F"))) << "no raw HDF5 stack: " << error;
    EXPECT_THAT(input_error_of([&] { ResultsStore::open_for_resume(cut, kHash); }),
                Not(HasSubstr("<")))
        << kept;
  }
}

// Note [Only checksummed files are parsed]: every file of tests/data/results/damaged (the
// inputs the results-reader fuzzer crashed libhdf5 with) and an old-format file are refused
// with one line before HDF5 parses them.
TEST(DamagedFile, FuzzFindingsAndOldFormatFilesAreRefusedBeforeHdf5Parses) {
  const auto damaged =
      scalebench::build_info::source_dir() / "tests" / "data" / "results" / "damaged";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(damaged)) {
    ++files;
    const std::string error = input_error_of([&] { read_results_overview(entry.path()); });
    EXPECT_THAT(error, HasSubstr("is not a scalebench results file")) << entry.path();
    EXPECT_THAT(error, HasSubstr("superblock is version 0")) << entry.path();
    EXPECT_THAT(input_error_of([&] { ResultsStore::open_for_resume(entry.path(), kHash); }),
                HasSubstr("is not a scalebench results file"));
  }
  EXPECT_GE(files, 1);

  TempDir dir;
  const auto old_format = dir.path() / "old.h5";
  {
    const Hdf5Handle file = own_file(
        HDF5_CHECK(H5Fcreate(old_format.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
  }
  EXPECT_THAT(input_error_of([&] { read_results_overview(old_format); }),
              HasSubstr("superblock is version 0"));
}

// Note [Disk full]: an update that the file system refuses (here: the file size limit, as
// `ulimit -f` sets it; a full tmpfs in tests/faults run_safety_disk_full) is one line with
// the path, the free space and what was kept, and the file is unchanged.
/// Runs `update` in a child process under a file size limit of `limit` bytes and returns
/// what it threw (or "no error"). A child, because libhdf5 1.10 keeps a file whose close
/// failed in its tables and crashes closing it again at exit (H5F__close_cb); scalebench's
/// writer ends the job with _exit after such an error, so only a test process would exit
/// normally with it.
std::string error_under_file_size_limit(rlim_t limit, const std::function<void()>& update) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
    struct rlimit limited {};
    getrlimit(RLIMIT_FSIZE, &limited);
    limited.rlim_cur = limit;
    setrlimit(RLIMIT_FSIZE, &limited);
    std::string error = "no error";
    try {
      update();
    } catch (const NoSpaceError& e) {
      error = e.what();
    } catch (const std::exception& e) {
      error = std::string("not a NoSpaceError: ") + e.what();
    }
    (void)!write(fds[1], error.data(), error.size());
    _exit(0);
  }
  close(fds[1]);
  std::string error;
  char buffer[4096];
  for (ssize_t got; (got = read(fds[0], buffer, sizeof buffer)) > 0;) error.append(buffer, got);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return error;
}

TEST(DiskFull, RefusedUpdateIsOneLineAndTheFileIsUnchanged) {
  TempDir dir;
  const auto path = dir.path() / "r.h5";
  const auto ids = write_two_cells(path);
  const auto size_before = std::filesystem::file_size(path);
  const std::string error = error_under_file_size_limit(size_before + 256, [&] {
    auto store = ResultsStore::open_for_resume(path, kHash);
    const CellSpec third = testing_util::train_cell(3);
    store.mark_running(third, {1, 2});
    store.complete_cell(third, testing_util::full_results(third));
  });

  EXPECT_THAT(error, HasSubstr("cannot update results file"));
  EXPECT_THAT(error, HasSubstr(path.filename().string()));
  EXPECT_THAT(error, HasSubstr("file size limit"));
  EXPECT_THAT(error, HasSubstr("MiB free"));
  EXPECT_THAT(error, HasSubstr("--resume"));
  EXPECT_THAT(error, Not(HasSubstr("\n")));
  EXPECT_THAT(error, Not(HasSubstr("H5")));
  const auto overview = read_results_overview(path);
  for (const auto& id : ids) {
    EXPECT_EQ(overview["cells"][id]["status"], "ok") << "the file keeps the finished cells";
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos)
        << "temporary left: " << entry.path();
  }
}

}  // namespace
}  // namespace scalebench
