// `scalebench probe` and `scalebench selftest` on CPU with the real worker library (run
// under mpiexec -n 2 and -n 3): exact collectives and their figures (Note [Probe figures]),
// a corrupted input caught by the check, the self-test's checks and plain output (Note
// [Self-test checks]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <set>
#include <string>

#include "common/base/exit_status.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "protocol/mpi_comm.h"
#include "protocol/worker_loop.h"
#include "run_real_cli.h"
#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

ProbeOptions small_probe() {
  ProbeOptions options;
  options.device = "cpu";
  options.min_bytes = 8;
  options.max_bytes = 32768;
  options.factor = 8;
  options.iterations = 3;
  options.warmup = 1;
  return options;
}

TEST(Probe, EveryCollectiveIsExactAndItsFiguresFollowNcclTests) {
  const WorkerContext context = discover_worker_context();
  const ProbeReport report = make_collective_probe()->run(small_probe(), MPI_COMM_WORLD, context);
  const int n = world_size();
  EXPECT_EQ(report.backend, "mpi");
  EXPECT_EQ(report.world_size, n);
  EXPECT_EQ(report.devices.size(), static_cast<size_t>(n));
  ASSERT_EQ(report.rows.size(), 4U * 5U) << "allreduce x2, broadcast, allgather x 8 B..32 KiB";
  std::set<std::string> operations;
  for (const auto& row : report.rows) {
    SCOPED_TRACE(row.operation + " " + std::to_string(row.bytes));
    operations.insert(row.operation);
    EXPECT_TRUE(row.ok) << row.max_error;
    EXPECT_EQ(row.max_error, 0.0);
    EXPECT_GT(row.time_s, 0.0);
    EXPECT_DOUBLE_EQ(row.algbw_gb_s, static_cast<double>(row.bytes) / row.time_s / 1e9);
    EXPECT_DOUBLE_EQ(row.busbw_gb_s, row.algbw_gb_s * busbw_factor(row.operation, n));
    if (row.operation == "allgather") {
      EXPECT_EQ(row.bytes, 4 * n * row.elements) << "the gathered output";
    } else {
      EXPECT_EQ(row.bytes, 4 * row.elements);
    }
    EXPECT_EQ(row.baseline_time_s > 0, row.operation == "allreduce") << "plain MPI: allreduce";
  }
  EXPECT_EQ(operations, (std::set<std::string>{"allreduce", "broadcast", "allgather"}));
  EXPECT_DOUBLE_EQ(busbw_factor("allreduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor("allgather", 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor("broadcast", 4), 1.0);
}

TEST(Probe, ACorruptedInputFailsTheCheckOnEveryRank) {
  ProbeOptions options = small_probe();
  options.operations = {"allreduce", "allgather"};
  options.corrupt_rank = world_size() - 1;
  const ProbeReport report =
      make_collective_probe()->run(options, MPI_COMM_WORLD, discover_worker_context());
  ASSERT_FALSE(report.rows.empty());
  for (const auto& row : report.rows) {
    EXPECT_FALSE(row.ok) << row.operation << " " << row.bytes;
    EXPECT_EQ(row.max_error, 1.0) << "one element off by the 1 added";
  }
}

TEST(Probe, TheCommandPrintsTheTableAndWritesTheFile) {
  std::unique_ptr<testing::TempDir> dir;
  std::string root;
  if (world_rank() == 0) {
    dir = std::make_unique<testing::TempDir>();
    root = dir->path().string();
  }
  root = testing_real::broadcast_from_rank0(root);
  const fs::path out = fs::path(root) / "probe.h5";
  ::testing::internal::CaptureStdout();
  const int status = testing_real::run_real_scalebench(
      {"probe", "--device", "cpu", "--max-bytes", "4K", "--factor", "16", "--iterations", "2",
       "--ops", "allreduce,broadcast", "-o", out.string()});
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(status, kExitOk);
  if (world_rank() != 0) return;
  EXPECT_THAT(printed, HasSubstr("busbw(GB/s)"));
  EXPECT_THAT(printed, HasSubstr("vs mpi"));
  EXPECT_THAT(printed, HasSubstr("# Check: every result exact"));
  const Hdf5Handle file = own_file(HDF5_CHECK(H5Fopen(out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  EXPECT_EQ(h5::read_string_attribute(file, "scalebench_probe_version"), "1.0");
  EXPECT_EQ(h5::read_string_attribute(file, "backend"), "mpi");
  EXPECT_EQ(h5::read_int64_attribute(file, "world_size"), world_size() - 1);
  const Hdf5Handle probe = own_group(HDF5_CHECK(H5Gopen2(file, "probe", H5P_DEFAULT)));
  const auto ok = h5::read_double_dataset(probe, "ok");
  EXPECT_EQ(ok.size(), 3U * 3U) << "allreduce x2 + broadcast at 8 B, 128 B, 2 KiB";
  for (const double value : ok) EXPECT_EQ(value, 1.0);
}

TEST(Probe, BadOptionsAreOneLineErrors) {
  ::testing::internal::CaptureStderr();
  const int status = testing_real::run_real_scalebench({"probe", "--max-bytes", "12Q"});
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, kExitBadInput);
  if (world_rank() == 0) {
    EXPECT_THAT(printed, HasSubstr("--max-bytes 12Q: use a number"));
  }
}

TEST(SelfTest, EveryCheckPassesOrIsSkippedOnThisMachine) {
  const auto checks = make_self_test()->run(MPI_COMM_WORLD, discover_worker_context());
  std::vector<std::string> names;
  for (const auto& check : checks) {
    SCOPED_TRACE(check.name + ": " + check.detail);
    names.push_back(check.name);
    EXPECT_NE(check.status, "fail");
    EXPECT_FALSE(check.detail.empty());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"devices", "collectives", "ddp", "timer", "cuda-timer",
                                             "cuda-memory", "oom"}));
  EXPECT_EQ(checks[2].status, world_size() >= 2 ? "pass" : "skip");
  EXPECT_THAT(checks[2].detail, HasSubstr("max |diff|"));
}

TEST(SelfTest, TheCommandPrintsOneLinePerCheck) {
  ::testing::internal::CaptureStdout();
  const int status = testing_real::run_real_scalebench({"selftest"});
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(status, kExitOk);
  if (world_rank() != 0) return;
  EXPECT_THAT(printed, HasSubstr("PASS  devices"));
  EXPECT_THAT(printed, HasSubstr("PASS  collectives"));
  EXPECT_THAT(printed, HasSubstr("0 failed"));
  if (world_size() >= 3) {
    EXPECT_THAT(printed, HasSubstr("PASS  ddp"));
  }
}

}  // namespace
}  // namespace scalebench
