// Note [Results durability] as a property: a writer SIGKILLed at random instants never
// leaves an unreadable file, a partially written cell, or a lost finished cell. The cost of
// an update is measured by tests/perf/results_store_cost.cc.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "results/reader.h"
#include "results/store.h"
#include "results_store_test_util.h"

namespace scalebench {
namespace {

constexpr const char* kHash = "durabledurable00";
constexpr int kWarmup = 10;
constexpr int kMeasured = 100;

/// Child process body: resume the file and write cells until killed.
[[noreturn]] void write_cells_forever(const std::filesystem::path& path, uint64_t first_seed) {
  try {
    auto store = ResultsStore::open_for_resume(path, kHash);
    for (uint64_t seed = first_seed;; ++seed) {
      const CellSpec cell = testing_util::train_cell(seed, 2, kWarmup, kMeasured);
      store.mark_running(cell, {1, 2});
      store.complete_cell(cell, testing_util::full_results(cell));
    }
  } catch (...) {
    _exit(3);
  }
}

/// Every cell must be either `running` without results, or `ok` with all of them and
/// the exact timings written.
void expect_every_cell_complete(const std::filesystem::path& path, std::set<std::string>& ok) {
  const nlohmann::json overview = read_results_overview(path);  // throws if unreadable
  const Hdf5Handle file = own_file(HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  for (const auto& [id, cell] : overview["cells"].items()) {
    SCOPED_TRACE(id);
    if (cell["status"] == "running") {
      EXPECT_TRUE(cell["datasets"].empty());
      EXPECT_TRUE(cell["summary"].is_null());
      continue;
    }
    ASSERT_EQ("ok", cell["status"]);
    EXPECT_EQ(nlohmann::json({"rank_devices", "rank_hosts", "rank_metrics", "timings"}),
              cell["datasets"]);
    ASSERT_TRUE(cell["summary"].is_object());
    EXPECT_EQ(kMeasured, cell["summary"]["count"]);
    const Hdf5Handle group =
        own_group(HDF5_CHECK(H5Gopen2(file, ("cells/" + id).c_str(), H5P_DEFAULT)));
    const auto timings = h5::read_double_dataset(group, "timings");
    const uint64_t seed = cell["spec"]["seed"].get<uint64_t>();
    ASSERT_EQ(2u * (kWarmup + kMeasured) * 7, timings.size());
    EXPECT_EQ(testing_util::fake_time_s(seed, 1, kWarmup + kMeasured - 1, 6), timings.back());
    ok.insert(id);
  }
}

TEST(ResultsDurability, SigkilledWriterNeverCorruptsOrLosesCells) {
  testing_util::TempDir dir;
  const auto path = dir.path() / "r.h5";
  ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  std::mt19937 random(12345);
  std::uniform_int_distribution<int> kill_after_ms(5, 250);
  std::set<std::string> ok_so_far;
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) write_cells_forever(path, 1000000ULL * (round + 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(kill_after_ms(random)));
    ASSERT_EQ(0, kill(child, SIGKILL));
    int status = 0;
    ASSERT_EQ(child, waitpid(child, &status, 0));
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited on its own, status " << status;

    std::set<std::string> ok_now;
    expect_every_cell_complete(path, ok_now);
    EXPECT_TRUE(std::includes(ok_now.begin(), ok_now.end(), ok_so_far.begin(), ok_so_far.end()))
        << "a finished cell disappeared";
    ok_so_far = ok_now;
  }
  EXPECT_GT(ok_so_far.size(), 0u) << "the writer never finished a cell: kill times too short";
  ResultsStore::open_for_resume(path, kHash);  // cleans the killed writers' temporaries
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ("r.h5", entry.path().filename()) << "left behind: " << entry.path();
  }
}

}  // namespace
}  // namespace scalebench
