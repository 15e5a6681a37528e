// Program cells (docs/programs.md) under mpiexec -n 3 with the real worker: the example DDP
// script of docs/examples/programs runs with the client at world sizes 1 and 2 (gloo), a
// program without the client is measured by its wall time, and a program that raises at
// step 3 is a failed cell with its output while the sweep goes on.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/base/build_info.h"
#include "common/base/exit_status.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "common/results/reader.h"
#include "protocol/mpi_comm.h"
#include "run_real_cli.h"
#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;

std::string matrix_text() {
  const fs::path source(build_info::source_dir());
  const std::string python = build_info::kPython;
  const std::string script = (source / "docs/examples/programs/train_ddp.py").string();
  const std::string client = (source / "protocol/client").string();
  return "name: programs\n"
         "defaults: {device: cpu, warmup: 2, iterations: 12, timeout_s: 120, cpu_threads: 1}\n"
         "sweep: {modes: [train], batch_sizes: [64]}\n"
         "experiments:\n"
         "  - name: ddp\n"
         "    world_sizes: [1, 2]\n"
         "    program:\n"
         "      command: [" +
         python + ", " + script +
         ", --batch-size, '{batch_size}', --steps, '{iterations}', --warmup, '{warmup}', --width, "
         "'2048']\n"
         "      env: {PYTHONPATH: " +
         client +
         "}\n"
         "  - name: plain\n"
         "    program: {command: [" +
         python +
         ", -c, 'import time; time.sleep(0.3)']}\n"
         "  - name: raises\n"
         "    program:\n"
         "      command: [" +
         python + ", " + script +
         ", --fail-at, '3', --steps, '{iterations}']\n"
         "      env: {PYTHONPATH: " +
         client +
         "}\n"
         "  - name: literal\n"
         "    program: {command: [" +
         python +
         ", -c, 'import sys; assert sys.argv[1] == \"{experiment}; touch /tmp/x $(id)\"', "
         "'{experiment}; touch /tmp/x $(id)']}\n";
}

/// Every rank's [iteration][phase] table of a cell, by phase name.
struct CellTimings {
  std::vector<std::string> phases;
  std::vector<unsigned long long> dims;
  std::vector<double> values;
  [[nodiscard]] double at(size_t rank, size_t row, const std::string& phase) const {
    const auto p = std::find(phases.begin(), phases.end(), phase) - phases.begin();
    return values[(rank * dims[1] + row) * dims[2] + static_cast<size_t>(p)];
  }
};

CellTimings read_timings(const fs::path& file, const std::string& id) {
  const auto h5 = own_file(HDF5_CHECK(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  const auto cell = own_group(HDF5_CHECK(H5Gopen2(h5, ("cells/" + id).c_str(), H5P_DEFAULT)));
  CellTimings t;
  t.dims = h5::dataset_dims(cell, "timings");
  t.values = h5::read_double_dataset(cell, "timings");
  const auto dataset = own_dataset(HDF5_CHECK(H5Dopen2(cell, "timings", H5P_DEFAULT)));
  t.phases = nlohmann::json::parse(h5::read_string_attribute(dataset, "phases"))
                 .get<std::vector<std::string>>();
  return t;
}

TEST(ProgramRun, ProgramsAreCellsWithTheirOwnPhasesAndFailuresAreRecorded) {
  if (std::string(build_info::kPython).empty()) GTEST_SKIP() << "no SCALEBENCH_PYTHON";
  const testing::TempDir dir;
  const auto run = testing_real::run_matrix(dir.path(), matrix_text());
  EXPECT_EQ(run.status, kExitCellsFailed);  // the `raises` cell
  if (world_rank() != 0) return;
  const auto cells = read_results_overview(run.results()).at("cells");
  ASSERT_EQ(cells.size(), 5U);
  for (const auto& [id, cell] : cells.items()) {
    SCOPED_TRACE(id);
    const auto& spec = cell.at("spec");
    const std::string experiment = spec.at("experiment");
    if (experiment == "raises") {
      EXPECT_EQ(cell.at("status"), "failed");
      EXPECT_NE(cell.at("reason").get<std::string>().find("failing at step 3 as asked"),
                std::string::npos)
          << cell.at("reason");
      continue;
    }
    ASSERT_EQ(cell.at("status"), "ok") << cell.value("reason", "");
    const auto timings = read_timings(run.results(), id);
    if (experiment != "ddp") {
      EXPECT_EQ(timings.phases, std::vector<std::string>{"step"});
      EXPECT_EQ(timings.dims[1], 1U);  // one measurement: the wall time
      if (experiment == "plain") EXPECT_GE(timings.at(0, 0, "step"), 0.3);
      continue;
    }
    const int world = spec.at("world_size");
    ASSERT_EQ(timings.dims[0], static_cast<unsigned long long>(world));
    ASSERT_EQ(timings.dims[1], 14U);  // 2 warm-up + 12 measured steps
    EXPECT_EQ(timings.phases,
              (std::vector<std::string>{"data", "forward", "backward", "optimizer", "step"}));
    for (size_t rank = 0; rank < timings.dims[0]; ++rank) {
      // The phases tile the step: their sum is the step's time less the client's own gaps
      // (98.8 % of a ~2 ms step here; 5 % leaves room for a loaded CI machine).
      std::vector<double> shares;
      for (size_t row = 0; row < timings.dims[1]; ++row) {
        double sum = 0;
        for (const char* phase : {"data", "forward", "backward", "optimizer"}) {
          sum += timings.at(rank, row, phase);
        }
        shares.push_back(sum / timings.at(rank, row, "step"));
      }
      std::sort(shares.begin(), shares.end());
      EXPECT_NEAR(shares[shares.size() / 2], 1.0, 0.05) << "rank " << rank;
    }
  }
}

}  // namespace
}  // namespace scalebench
