// `scalebench run` end to end (run_cli on every rank, fake CellRunner, real matrix loader
// and HDF5 results store): statuses, dataset shapes and summaries recomputed from the raw
// timings, both scheduling modes, failures, skipped cells, --force and --resume.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "orchestrator/commands.h"
#include "protocol/mpi_comm.h"
#include "results/reader.h"
#include "results/store.h"
#include "run_fake_cli.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;

/// A directory shared by all ranks (rank 0's pid in the name), removed at the end.
class SharedTempDir {
 public:
  SharedTempDir() {
    int pid = static_cast<int>(getpid());
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    path_ = fs::temp_directory_path() / ("scalebench_orch_run_" + std::to_string(pid));
    if (world_rank() == 0) {
      fs::remove_all(path_);
      fs::create_directories(path_);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  ~SharedTempDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) fs::remove_all(path_);
  }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_file(const fs::path& path, const std::string& text) {
  if (world_rank() == 0) std::ofstream(path) << text;
  MPI_Barrier(MPI_COMM_WORLD);
}

using testing_fake::run_fake_cli;

constexpr const char* kGridMatrix = R"(name: grid
defaults: {device: cpu, backend: mpi, warmup: 1, iterations: 6, timeout_s: 60}
sweep: {modes: [train, infer], batch_sizes: [8, 16], world_sizes: [1, 2]}
experiments:
  - {name: mlp, model: mlp, input_shape: [784], num_classes: 10}
)";

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// Reads /cells/<id>/timings and recomputes the summary's median and throughput.
void expect_summary_matches_timings(const fs::path& file_path, const std::string& id,
                                    const nlohmann::json& cell) {
  const Hdf5Handle file =
      own_file(HDF5_CHECK(H5Fopen(file_path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  const Hdf5Handle group =
      own_group(HDF5_CHECK(H5Gopen2(file, ("/cells/" + id).c_str(), H5P_DEFAULT)));
  const auto dims = h5::dataset_dims(group, "timings");
  const auto& spec = cell.at("spec");
  const bool train = spec.at("mode") == "train";
  const size_t world = spec.at("world_size").get<size_t>();
  ASSERT_EQ(dims.size(), 3u);
  EXPECT_EQ(dims[0], world);
  EXPECT_EQ(dims[1], 7u);  // 1 warm-up + 6 measured
  EXPECT_EQ(dims[2], train ? 4u : 3u);
  EXPECT_EQ(h5::dataset_dims(group, "rank_metrics")[0], world);
  const auto timings = h5::read_double_dataset(group, "timings");
  const size_t phase = train ? 3 : 2;  // "step" / "batch", see fake_cell_runner.h
  std::vector<double> samples;
  for (size_t i = 1; i < dims[1]; ++i) {
    double slowest = 0;
    for (size_t r = 0; r < world; ++r) {
      const double t = timings[(r * dims[1] + i) * dims[2] + phase];
      if (train) {
        slowest = std::max(slowest, t);
      } else {
        samples.push_back(t);
      }
    }
    if (train) samples.push_back(slowest);
  }
  const auto& summary = cell.at("summary");
  EXPECT_NEAR(summary.at("median_s").get<double>(), median(samples), 1e-12) << id;
  if (train) {
    const double batch = spec.at("batch_size").get<double>();
    EXPECT_NEAR(summary.at("throughput_samples_per_s").get<double>(),
                batch * world / median(samples), 1e-6);
  }
}

class RunCommand : public testing::TestWithParam<std::string> {};

TEST_P(RunCommand, GridAllOkWithCheckedResultsFile) {
  const SharedTempDir dir;
  const fs::path matrix = dir.path() / "grid.yaml";
  const fs::path out = dir.path() / "results.h5";
  write_file(matrix, kGridMatrix);
  const int status = run_fake_cli({matrix.string(), "-o", out.string(), "--quiet", "--scheduling",
                                   GetParam(), "--log-dir", (dir.path() / "logs").string()});
  EXPECT_EQ(status, kExitOk);
  if (world_rank() == 0) {
    const auto overview = read_results_overview(out);
    ASSERT_EQ(overview.at("cells").size(), 8u);
    for (const auto& [id, cell] : overview.at("cells").items()) {
      EXPECT_EQ(cell.at("status"), "ok") << id << ": " << cell.dump();
      expect_summary_matches_timings(out, id, cell);
    }
    EXPECT_EQ(overview.at("provenance").at("mpi_size"), world_size());
    EXPECT_EQ(overview.at("provenance").at("devices").size(),
              static_cast<size_t>(world_size() - 1));
    EXPECT_NE(overview.at("provenance").at("end_time"), "");
    for (int rank = 0; rank < world_size(); ++rank) {
      EXPECT_TRUE(fs::exists(dir.path() / "logs" / ("rank-" + std::to_string(rank) + ".log")));
    }
  }
  // Overwriting needs --force; --resume of a finished file runs nothing and stays ok.
  EXPECT_EQ(run_fake_cli({matrix.string(), "-o", out.string(), "--quiet"}), kExitBadInput);
  EXPECT_EQ(run_fake_cli({matrix.string(), "-o", out.string(), "--quiet", "--resume"}), kExitOk);
  if (world_rank() == 0) {
    const auto overview = read_results_overview(out);
    EXPECT_EQ(overview.at("provenance").at("run_count"), 2);
    EXPECT_EQ(overview.at("cells").size(), 8u);
  }
  EXPECT_EQ(run_fake_cli({matrix.string(), "-o", out.string(), "--quiet", "--force"}), kExitOk);
  if (world_rank() == 0) {
    EXPECT_EQ(read_results_overview(out).at("provenance").at("run_count"), 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, RunCommand, testing::Values("exclusive", "packed"));

TEST(RunCommandFailures, FailedOomAndSkippedCellsAreRecorded) {
  const SharedTempDir dir;
  const fs::path matrix = dir.path() / "faults.yaml";
  const fs::path out = dir.path() / "results.h5";
  write_file(matrix, R"(name: faults
scheduling: packed
defaults: {device: cpu, backend: mpi, warmup: 1, iterations: 5, timeout_s: 60}
sweep: {modes: [train], batch_sizes: [4], world_sizes: [2]}
experiments:
  - {name: mlp-throw, model: mlp, input_shape: [16], num_classes: 2}
  - {name: mlp-oom, model: mlp, input_shape: [16], num_classes: 2, world_sizes: [1]}
  - {name: mlp-ok, model: mlp, input_shape: [16], num_classes: 2, world_sizes: [1, 2, 16]}
)");
  EXPECT_EQ(run_fake_cli({matrix.string(), "-o", out.string(), "--quiet"}), kExitCellsFailed);
  if (world_rank() != 0) return;
  const auto overview = read_results_overview(out);
  std::map<std::string, std::string> status_by_experiment;
  for (const auto& [id, cell] : overview.at("cells").items()) {
    const std::string key = cell.at("spec").at("experiment").get<std::string>() + "/w" +
                            std::to_string(cell.at("spec").at("world_size").get<int>());
    status_by_experiment[key] = cell.at("status");
    if (cell.at("status") == "failed") {
      EXPECT_EQ(cell.at("failed_phase"), "forward");
      EXPECT_NE(cell.at("reason").get<std::string>().find("requested exception"),
                std::string::npos);
    }
    if (cell.at("status") == "skipped") {
      EXPECT_NE(cell.at("reason").get<std::string>().find("needs 16 workers"), std::string::npos);
    }
  }
  EXPECT_EQ(status_by_experiment, (std::map<std::string, std::string>{{"mlp-ok/w1", "ok"},
                                                                      {"mlp-ok/w16", "skipped"},
                                                                      {"mlp-ok/w2", "ok"},
                                                                      {"mlp-oom/w1", "oom"},
                                                                      {"mlp-throw/w2", "failed"}}));
}

}  // namespace
}  // namespace scalebench
