// The TorchCellRunner on a real group communicator (run under mpiexec -n 2 and -n 3):
// sharded inference equals one process, training timings add up, replicas stay in sync,
// and failures, timeouts and CUDA requests are agreed by the whole group.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <thread>
#include <vector>

#include "common/cell/adaptive_stop.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "protocol/mpi_comm.h"
#include "run_cell.h"
#include "worker/accuracy_sums.h"
#include "worker/torch_cell_runner.h"

namespace scalebench {
namespace {

using testing_real::context_for;
using testing_real::run_cell;

double group_sum(double value) {
  double sum = 0.0;
  MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}

CellSpec inference_cell(const std::string& model, std::vector<int64_t> shape) {
  CellSpec cell;
  cell.experiment = "infer-" + model;
  cell.model.zoo = model;
  cell.input_shape = std::move(shape);
  cell.mode = Mode::kInfer;
  cell.device = Device::kCpu;
  cell.batch_size = 4;
  cell.samples = 11;
  cell.warmup_iterations = 1;
  cell.seed = 5;
  return cell;
}

TEST(WorkloadMpi, ShardedInferenceChecksumEqualsOneProcess) {
  for (const auto& [model, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"mlp", {}}, {"resnet18", {3, 32, 32}}, {"transformer", {16}}}) {
    SCOPED_TRACE(model);
    const CellSpec cell = inference_cell(model, shape);
    const RankResult single = run_cell(cell, MPI_COMM_SELF);
    ASSERT_EQ(single.status, CellStatus::kOk) << single.reason;
    const RankResult shard = run_cell(cell, MPI_COMM_WORLD);
    ASSERT_EQ(shard.status, CellStatus::kOk) << shard.reason;
    EXPECT_EQ(group_sum(shard.metrics.at("samples")), 11.0);
    const double reference = single.metrics.at("output_checksum");
    EXPECT_GT(reference, 0.0);
    EXPECT_NEAR(group_sum(shard.metrics.at("output_checksum")), reference, 1e-6 * reference);
    // Batches of this rank's shard after the warm-up batch; phases in the documented order.
    EXPECT_EQ(shard.phases, (std::vector<std::string>{"load", "h2d", "forward", "d2h", "batch"}));
    EXPECT_EQ(shard.warmup_iterations, 1);
    const auto shard_samples = static_cast<int64_t>(shard.metrics.at("samples"));
    EXPECT_EQ(static_cast<int64_t>(shard.iterations()), 1 + (shard_samples + 3) / 4);
  }
}

CellSpec training_cell() { return testing_real::mlp_training_cell(128, 10); }

TEST(WorkloadMpi, TrainingTimingsAddUpAndReplicasStayInSync) {
  const RankResult result = run_cell(training_cell(), MPI_COMM_WORLD);
  ASSERT_EQ(result.status, CellStatus::kOk)
      << to_string(result.failed_phase) << ": " << result.reason;
  const std::vector<std::string> phases = {"data",      "h2d",       "forward", "backward",
                                           "comm_wait", "optimizer", "step"};
  ASSERT_EQ(result.phases, phases);
  ASSERT_EQ(result.iterations(), 12u);
  EXPECT_EQ(result.warmup_iterations, 2);
  ASSERT_EQ(result.phase_starts_s.size(), result.timings_s.size());
  const size_t step_phase = phases.size() - 1;
  const auto begin = [&](size_t row, size_t phase) {
    return result.phase_starts_s[row * phases.size() + phase];
  };
  const auto end = [&](size_t row, size_t phase) {
    return begin(row, phase) + result.timings_s[row * phases.size() + phase];
  };
  double steps = 0.0, inside_all = 0.0, worst_row = 1.0;
  std::vector<double> outside, gaps, step_times;
  for (size_t row = 2; row < 12; ++row) {
    const double* times = &result.timings_s[row * phases.size()];
    const double inside = std::accumulate(times, times + phases.size() - 1, 0.0);
    const double step = times[step_phase];
    EXPECT_LE(inside, step * (1 + 1e-9));
    // Exact, whatever the load: the phases one after another inside their step, and each
    // step after the one before.
    EXPECT_GE(begin(row, 0), begin(row, step_phase) - 1e-9) << row;
    for (size_t phase = 1; phase < step_phase; ++phase) {
      EXPECT_GE(begin(row, phase), end(row, phase - 1) - 1e-9) << row << " " << phase;
    }
    EXPECT_LE(end(row, step_phase - 1), end(row, step_phase) + 1e-9) << row;
    if (row > 2) gaps.push_back(begin(row, step_phase) - end(row - 1, step_phase));
    worst_row = std::min(worst_row, inside / step);
    outside.push_back(step - inside);
    step_times.push_back(step);
    steps += step;
    inside_all += inside;
  }
  const auto median = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  };
  // The time outside the phases (the loop's glue inside a step) and between steps: guards
  // against time the harness loses, which would be in every row. Taken as medians over the
  // rows: with more ranks than cores (CI), or on a busy machine (issue 43: the sums over the
  // loop within 5 % and 2 % failed so), a rank preempted between two phases or two steps
  // shows that time in that one row, as it should, but not in most rows.
  const double typical_step = median(step_times);
  EXPECT_LE(median(outside), 0.05 * typical_step) << "time outside the phases";
  EXPECT_GE(*std::min_element(gaps.begin(), gaps.end()), -1e-9) << "steps overlap";
  EXPECT_LE(median(gaps), 0.02 * typical_step) << "time lost between steps";
  const double wall = result.metrics.at("loop_wall_s");
  EXPECT_LE(steps, wall * (1 + 1e-9)) << "the loop's clock holds every step";
  const double span = end(11, step_phase) - begin(2, step_phase);
  EXPECT_LE(wall - span, 0.02 * wall) << "time at the loop's edges";
  // Every rank prints its figures (the test main shows only rank 0's failures).
  std::printf(
      "rank %d of %d: sum(phases)/sum(step) = %.4f (lowest row %.4f), "
      "sum(step)/loop_wall_s = %.4f, mean step %.2f ms, comm_wait of last row %.3f ms\n",
      world_rank(), world_size(), inside_all / steps, worst_row, steps / wall, 1e3 * steps / 10,
      1e3 * result.timings_s[11 * phases.size() + 4]);
  EXPECT_TRUE(std::isfinite(result.metrics.at("final_loss")));
  EXPECT_EQ(result.metrics.at("parameter_count"), 784 * 512 + 512 + 512 * 512 + 512 + 5130);
  EXPECT_GT(result.metrics.at("peak_rss_bytes"), 0.0);
  double checksum = result.metrics.at("param_checksum"), lowest = 0.0, highest = 0.0;
  MPI_Allreduce(&checksum, &lowest, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&checksum, &highest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_NEAR(lowest, highest, 1e-9 * std::abs(highest)) << "replicas diverged";
}

TEST(WorkloadMpi, EveryLossTrainsAndAutoIsCrossEntropy) {
  std::map<std::string, RankResult> results;
  for (const std::string loss :
       {"auto", "cross_entropy", "mse", "l1", "smooth_l1", "bce_with_logits"}) {
    SCOPED_TRACE(loss);
    CellSpec cell = training_cell();
    cell.loss = loss;
    cell.batch_size = 16;
    cell.measured_iterations = 4;
    const RankResult result = run_cell(cell, MPI_COMM_WORLD);
    ASSERT_EQ(result.status, CellStatus::kOk)
        << to_string(result.failed_phase) << ": " << result.reason;
    EXPECT_TRUE(std::isfinite(result.metrics.at("final_loss")));
    results.emplace(loss, result);
  }
  // Same samples, same loss: auto is cross entropy bit for bit (only the id differs).
  for (const std::string metric : {"final_loss", "param_checksum"}) {
    EXPECT_EQ(results.at("auto").metrics.at(metric), results.at("cross_entropy").metrics.at(metric))
        << metric;
  }
}

TEST(WorkloadMpi, Unet3dTrainsLabelFreeWithMse) {
  CellSpec cell = training_cell();
  cell.experiment = "train-unet3d-mse";
  cell.model.zoo = "unet3d";
  cell.input_shape = {1, 8, 8, 8};
  cell.num_classes = 1;
  cell.loss = "mse";
  cell.batch_size = 2;
  cell.warmup_iterations = 1;
  cell.measured_iterations = 3;
  const RankResult result = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(result.status, CellStatus::kOk)
      << to_string(result.failed_phase) << ": " << result.reason;
  EXPECT_TRUE(std::isfinite(result.metrics.at("final_loss")));
  EXPECT_GT(result.metrics.at("final_loss"), 0.0);
}

/// A file of 6 mlp inputs [6, 784] (and float targets [6, 3] when `with_targets`) that rank 0
/// writes in the temporary directory; every rank gets its path.
std::string shared_images_file(bool with_targets) {
  int pid = ::getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const auto path =
      std::filesystem::temp_directory_path() / ("scalebench_workload_" + std::to_string(pid) +
                                                (with_targets ? "_targets.h5" : "_images.h5"));
  if (world_rank() == 0) {
    const auto file =
        own_file(HDF5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
    h5::write_double_dataset(file, "inputs", {6, 784}, std::vector<double>(6 * 784, 0.5));
    if (with_targets) h5::write_double_dataset(file, "targets", {6, 3}, std::vector<double>(18, 1));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path.string();
}

TEST(WorkloadMpi, Hdf5InferenceNeedsNoTargetsAndTrainingSaysWhatToChange) {
  const std::string images = shared_images_file(/*with_targets=*/false);
  const std::string regression = shared_images_file(/*with_targets=*/true);
  CellSpec cell = inference_cell("mlp", {});
  cell.data = {"hdf5", images, "inputs", "targets"};
  const RankResult inference = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(inference.status, CellStatus::kOk)
      << to_string(inference.failed_phase) << ": " << inference.reason;
  EXPECT_EQ(group_sum(inference.metrics.at("samples")), 11.0);

  CellSpec train = training_cell();
  train.batch_size = 4;
  train.measured_iterations = 2;
  train.source = "matrix.yaml:9";
  train.data = cell.data;
  const RankResult unlabelled = run_cell(train, MPI_COMM_WORLD);
  EXPECT_EQ(unlabelled.status, CellStatus::kFailed);
  EXPECT_EQ(unlabelled.failed_phase, FailurePhase::kDataOpen);
  for (const std::string needle : {"no dataset 'targets'", "data.targets", "matrix.yaml:9"}) {
    EXPECT_NE(unlabelled.reason.find(needle), std::string::npos) << unlabelled.reason;
  }
  // mlp's output is [10] per sample; the file's float targets are [3].
  train.loss = "mse";
  train.data.path = regression;
  const RankResult mismatched = run_cell(train, MPI_COMM_WORLD);
  EXPECT_EQ(mismatched.failed_phase, FailurePhase::kDataOpen);
  for (const std::string needle : {"float64 [6, 3]", "output's shape [10]", "[rows, 10]"}) {
    EXPECT_NE(mismatched.reason.find(needle), std::string::npos) << mismatched.reason;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    std::filesystem::remove(images);
    std::filesystem::remove(regression);
  }
}

TEST(WorkloadMpi, ARankFailingAtInitDoesNotHangTheGroup) {
  CellSpec cell = training_cell();
  if (world_rank() == 1) cell.optimizer.name = "lamb";  // only rank 1 cannot build its optimizer
  const RankResult result = run_cell(cell, MPI_COMM_WORLD);
  EXPECT_EQ(result.status, CellStatus::kFailed);
  if (world_rank() == 1) {
    EXPECT_EQ(result.failed_phase, FailurePhase::kModelInit);
    EXPECT_NE(result.reason.find("lamb"), std::string::npos) << result.reason;
  } else {
    EXPECT_EQ(result.failed_phase, FailurePhase::kGroup);
    EXPECT_NE(result.reason.find("group rank 1"), std::string::npos) << result.reason;
  }
}

TEST(WorkloadMpi, TimeoutStopsEveryTrainingRankAtTheSameIteration) {
  CellSpec cell = training_cell();
  cell.timeout_s = 0.0;
  const RankResult result = run_cell(cell, MPI_COMM_WORLD);
  EXPECT_EQ(result.status, CellStatus::kTimeout) << result.reason;
  const double rows = static_cast<double>(result.iterations());
  EXPECT_GE(rows, 1.0);
  EXPECT_LT(rows, 12.0);
  EXPECT_EQ(group_sum(rows), rows * world_size());
}

/// Note [Iterations auto]: the group decides on the slowest rank's figures, so every rank
/// stops at the same iteration for the same reason, even when one rank is much noisier
/// (here: a busy thread competing with rank 1's intra-op threads).
TEST(WorkloadMpi, IterationsAutoStopsEveryRankAtTheSameIteration) {
  for (const Mode mode : {Mode::kTrain, Mode::kInfer}) {
    SCOPED_TRACE(to_string(mode));
    CellSpec cell = mode == Mode::kTrain ? training_cell() : inference_cell("mlp", {});
    cell.samples = 0;  // iterations auto: the worker sizes the dataset from max_iterations
    cell.world_size = world_size();
    cell.warmup_iterations = kWarmupAuto;
    cell.measured_iterations = kIterationsAuto;
    cell.ci_width = 0.03;
    cell.max_seconds = 5.0;
    std::atomic<bool> done{false};
    std::thread noise;
    if (world_rank() == 1) {
      noise = std::thread([&done] {
        volatile double sink = 0.0;
        while (!done.load()) {
          for (int i = 0; i < 100000; ++i) sink = sink + 1.0;
          std::this_thread::sleep_for(std::chrono::microseconds(300));
        }
      });
    }
    const RankResult result = run_cell(cell, MPI_COMM_WORLD);
    done = true;
    if (noise.joinable()) noise.join();
    ASSERT_EQ(result.status, CellStatus::kOk) << result.reason;
    const double rows = static_cast<double>(result.iterations());
    const double warmup = result.warmup_iterations;
    EXPECT_EQ(group_sum(rows), rows * world_size());
    EXPECT_EQ(group_sum(warmup), warmup * world_size());
    EXPECT_GE(warmup, 2.0 * WarmupAuto::kWarmupWindow);
    EXPECT_FALSE(result.warmup_reason.empty());
    EXPECT_GE(rows - warmup, static_cast<double>(AdaptiveStop::kMinMeasured));
    const std::vector<std::string> reasons = {"precise", "budget", "cap"};
    const auto reason = std::find(reasons.begin(), reasons.end(), result.stop_reason);
    ASSERT_NE(reason, reasons.end()) << result.stop_reason;
    // The same reason on every rank.
    const double index = static_cast<double>(reason - reasons.begin());
    EXPECT_EQ(group_sum(index), index * world_size()) << result.stop_reason;
    if (result.stop_reason == "precise") {
      EXPECT_LE(result.metrics.at("median_ci_rel"), 0.03);
    }
  }
}

/// `warmup: auto` with fixed iterations: the group votes during the warm-up only, so
/// inference shards of different lengths (11 samples over 2 or 3 ranks) run their own
/// batches afterwards without a vote left unmatched.
TEST(WorkloadMpi, WarmupAutoThenUnevenInferenceShards) {
  CellSpec cell = inference_cell("mlp", {});
  cell.world_size = world_size();
  cell.warmup_iterations = kWarmupAuto;
  const RankResult result = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(result.status, CellStatus::kOk) << result.reason;
  EXPECT_FALSE(result.warmup_reason.empty());
  const auto samples = static_cast<int64_t>(result.metrics.at("samples"));
  EXPECT_EQ(static_cast<int64_t>(result.iterations()) - result.warmup_iterations,
            (samples + 3) / 4);
  EXPECT_EQ(group_sum(static_cast<double>(samples)), 11.0);
}

/// Validation of a training cell that chose its iterations replays exactly the steps it
/// ran (their count and indices), so the fp32 reference of an fp32 cell is identical.
TEST(WorkloadMpi, TrainingValidationReplaysTheStepsAnAutoCellChose) {
  CellSpec cell = training_cell();
  cell.warmup_iterations = kWarmupAuto;
  cell.measured_iterations = kIterationsAuto;
  cell.ci_width = 0.2;
  cell.max_seconds = 2.0;
  cell.validate = true;
  const RankResult result = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(result.status, CellStatus::kOk) << result.reason;
  ASSERT_TRUE(result.accuracy.has_value());
  EXPECT_EQ(result.accuracy->verdict, "passed");
  EXPECT_EQ(result.accuracy->values.at("max_loss_rel_deviation"), 0.0);
}

TEST(WorkloadMpi, IterationsAutoStopsOnItsBudgetOrItsCap) {
  CellSpec cell = training_cell();
  cell.measured_iterations = kIterationsAuto;
  cell.ci_width = 1e-9;  // unreachable
  cell.max_seconds = 0.5;
  const RankResult budget = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(budget.status, CellStatus::kOk) << budget.reason;
  EXPECT_EQ(budget.stop_reason, "budget");
  // The blocks are cut to what is left: one block past the budget at most. A block is at
  // most a quarter of the iterations so far (and kMinBlock), planned at the speed so far; a
  // busy machine slows it after it was planned (issue 43: an absolute 1.5 s failed so). So
  // the bound is stated in this run's own slowest step: the budget, then at most such a
  // block of slowest steps.
  const size_t step_column = budget.phases.size() - 1;
  double slowest = 0.0;
  const auto first_measured = static_cast<size_t>(budget.warmup_iterations);
  for (size_t row = first_measured; row < budget.iterations(); ++row) {
    slowest = std::max(slowest, budget.timings_s[row * budget.phases.size() + step_column]);
  }
  const auto measured_rows = static_cast<double>(budget.iterations() - first_measured);
  const double last_block =
      std::max(static_cast<double>(AdaptiveStop::kMinBlock), std::ceil(measured_rows / 4));
  EXPECT_LT(budget.metrics.at("loop_wall_s"), cell.max_seconds + 1.2 * last_block * slowest)
      << measured_rows << " rows, slowest step " << slowest << " s";
  EXPECT_GT(budget.metrics.at("median_ci_rel"), 1e-9);

  cell.max_seconds = 600.0;
  cell.max_iterations = 12;
  const RankResult cap = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(cap.status, CellStatus::kOk) << cap.reason;
  EXPECT_EQ(cap.stop_reason, "cap");
  EXPECT_EQ(cap.metrics.at("measured_iterations"), 12.0);
  EXPECT_EQ(cap.warmup_iterations, 2);  // fixed warm-up alongside auto iterations
  EXPECT_EQ(cap.warmup_reason, "");
}

TEST(WorkloadMpi, UnusableRequestsFailWithAReason) {
  CellSpec cell = training_cell();
  cell.precision = Precision::kFp16;
  const RankResult result = run_cell(cell, MPI_COMM_WORLD);
  EXPECT_EQ(result.status, CellStatus::kFailed);
  EXPECT_NE(result.reason.find("bf16"), std::string::npos) << result.reason;
}

TEST(WorkloadMpi, CudaRequestWithoutAGpuFailsWithAReason) {
  if (torch::cuda::is_available()) {
    GTEST_SKIP() << "a CUDA GPU is present: the request would succeed";
  }
  CellSpec cell = training_cell();
  cell.device = Device::kCuda;
  const RankResult result = run_cell(cell, MPI_COMM_WORLD);
  EXPECT_EQ(result.status, CellStatus::kFailed);
  EXPECT_EQ(result.failed_phase, FailurePhase::kDevice);
  EXPECT_NE(result.reason.find("no CUDA GPU"), std::string::npos) << result.reason;
}

TEST(WorkloadMpiGpu, TrainingWithNccl) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU";
  if (static_cast<int>(torch::cuda::device_count()) < world_size()) {
    GTEST_SKIP() << "fewer GPUs than ranks";
  }
  CellSpec cell = training_cell();
  cell.device = Device::kCuda;
  const RankResult result = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(result.status, CellStatus::kOk) << result.reason;
  EXPECT_GT(result.metrics.at("peak_allocated_bytes"), 0.0);
}

// Note [Accuracy validation]: the group's figures are those of one process comparing
// every sample (exact reduction of sums and maxima), for a per-voxel model (3D SSIM) in
// bf16 against its fp32 reference.
TEST(WorkloadMpi, InferenceValidationReducesExactlyAcrossRanks) {
  CellSpec cell = inference_cell("unet3d", {1, 8, 8, 8});
  cell.precision = Precision::kBf16;
  cell.validate = true;
  cell.validation_samples = 5;  // the default tolerance, 0.01
  // The same kernels on the same shapes, hence the same outputs, in both runs: one thread,
  // and batches of one sample (a bf16 kernel's rounding may depend on the batch size).
  cell.cpu_threads = 1;
  cell.batch_size = 1;
  const RankResult single = run_cell(cell, MPI_COMM_SELF);
  ASSERT_EQ(single.status, CellStatus::kOk) << single.reason;
  const RankResult group = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(group.status, CellStatus::kOk) << group.reason;
  ASSERT_TRUE(single.accuracy && group.accuracy);
  EXPECT_EQ(group.accuracy->kind, "inference");
  EXPECT_EQ(group.accuracy->values.at("validation_samples"), 5.0);
  EXPECT_EQ(group.accuracy->values.at("elements"), 5.0 * 2 * 8 * 8 * 8);
  EXPECT_EQ(group.accuracy->values.at("elements"), single.accuracy->values.at("elements"));
  for (const auto& [name, expected] : single.accuracy->values) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(group.accuracy->values.contains(name));
    EXPECT_NEAR(group.accuracy->values.at(name), expected,
                1e-9 * std::max(1.0, std::abs(expected)));
  }
  EXPECT_GT(single.accuracy->values.at("mae"), 0.0) << "bf16 differs from fp32";
  EXPECT_GT(single.accuracy->values.at("ssim"), 0.9);
  EXPECT_EQ(group.accuracy->verdict, "passed") << group.accuracy->failed_checks.front();
  EXPECT_GT(group.metrics.at("validation_s"), 0.0);
}

TEST(WorkloadMpi, Bf16InferencePassesAtTheDefaultToleranceAndABrokenVariantFails) {
  CellSpec cell = inference_cell("resnet18", {3, 32, 32});
  cell.precision = Precision::kBf16;
  cell.validate = true;
  const RankResult kept = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(kept.status, CellStatus::kOk) << kept.reason;
  ASSERT_TRUE(kept.accuracy);
  EXPECT_EQ(kept.accuracy->values.at("tolerance"), 0.01);
  EXPECT_EQ(kept.accuracy->verdict, "passed") << kept.accuracy->failed_checks.front();
  EXPECT_GT(kept.accuracy->values.at("mae"), 0.0) << "bf16 differs from fp32";
  set_validation_output_shift_for_testing(0.05);
  const RankResult broken = run_cell(cell, MPI_COMM_WORLD);
  set_validation_output_shift_for_testing(0.0);
  ASSERT_TRUE(broken.accuracy);
  EXPECT_EQ(broken.accuracy->verdict, "failed");
  ASSERT_FALSE(broken.accuracy->failed_checks.empty());
  EXPECT_EQ(broken.accuracy->failed_checks.front().rfind("mae_rel ", 0), 0U)
      << broken.accuracy->failed_checks.front();
}

TEST(WorkloadMpi, InferenceValidationOfAnUnoptimizedCellFindsNoDifference) {
  CellSpec cell = inference_cell("resnet18", {3, 32, 32});
  cell.validate = true;
  cell.tolerance = 1e-6;
  const RankResult result = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(result.status, CellStatus::kOk) << result.reason;
  ASSERT_TRUE(result.accuracy);
  EXPECT_LE(result.accuracy->values.at("mae_rel"), 1e-6);
  EXPECT_EQ(result.accuracy->values.count("ssim"), 0U) << "logits have no SSIM";
  EXPECT_EQ(result.accuracy->verdict, "passed");
}

TEST(WorkloadMpi, TrainingValidationReplaysTheStepsAndNamesTheFailedCheck) {
  CellSpec cell = training_cell();
  cell.validate = true;
  const RankResult same = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(same.status, CellStatus::kOk) << same.reason;
  ASSERT_TRUE(same.accuracy);
  EXPECT_EQ(same.accuracy->kind, "training");
  EXPECT_EQ(same.accuracy->values.at("steps"), 12.0) << "warm-up and measured steps";
  EXPECT_LE(same.accuracy->values.at("max_loss_rel_deviation"), 1e-6) << "fp32 replays fp32";
  EXPECT_LE(same.accuracy->values.at("param_rel_distance"), 1e-6);
  EXPECT_EQ(same.accuracy->verdict, "passed");

  cell.precision = Precision::kBf16;  // the default tolerance: bf16 training keeps it
  const RankResult kept = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_TRUE(kept.accuracy);
  EXPECT_EQ(kept.accuracy->verdict, "passed") << kept.accuracy->failed_checks.front();
  cell.tolerance = 1e-9;
  const RankResult bf16 = run_cell(cell, MPI_COMM_WORLD);
  ASSERT_EQ(bf16.status, CellStatus::kOk) << "a failed verdict does not fail the cell";
  ASSERT_TRUE(bf16.accuracy);
  EXPECT_GT(bf16.accuracy->values.at("max_loss_rel_deviation"), 1e-9);
  EXPECT_EQ(bf16.accuracy->verdict, "failed");
  ASSERT_FALSE(bf16.accuracy->failed_checks.empty());
  EXPECT_EQ(bf16.accuracy->failed_checks.front().rfind("max_loss_rel_deviation ", 0), 0U);
  // Note [Reference spread]: the failed check ran the reference again; on the CPU it repeats
  // bit for bit, so the spread is 0 and cannot excuse the failure.
  EXPECT_EQ(bf16.accuracy->values.at("reference_loss_spread"), 0.0);
  EXPECT_EQ(bf16.accuracy->values.at("reference_param_spread"), 0.0);
  EXPECT_EQ(same.accuracy->values.count("reference_param_spread"), 0U) << "passed: no second run";
}

// Note [CUDA graphs for inference]: replaying captured forwards (the full batch and the
// shard's smaller last batch) gives the eager outputs, in fp32 and in bf16 channels-last.
TEST(WorkloadMpiGpu, CudaGraphInferenceEqualsEagerInference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU";
  for (const bool low_precision : {false, true}) {
    SCOPED_TRACE(low_precision ? "bf16 channels_last" : "fp32");
    CellSpec cell = inference_cell("resnet18", {3, 32, 32});
    cell.device = Device::kCuda;
    if (low_precision) {
      cell.precision = Precision::kBf16;
      cell.channels_last = true;
    }
    const RankResult eager = run_cell(cell, MPI_COMM_SELF);
    ASSERT_EQ(eager.status, CellStatus::kOk) << eager.reason;
    cell.cuda_graphs = true;
    cell.validate = true;  // the replayed graph against the eager fp32 reference
    cell.tolerance = 0.05;
    const RankResult graphs = run_cell(cell, MPI_COMM_SELF);
    ASSERT_EQ(graphs.status, CellStatus::kOk) << graphs.reason;
    EXPECT_EQ(graphs.effective.at("cuda_graphs"), "true");
    EXPECT_EQ(graphs.metrics.at("cuda_graphs_captured"), 2.0) << "batches of 4 and of 3";
    EXPECT_GT(graphs.metrics.at("cuda_graph_capture_s"), 0.0);
    ASSERT_TRUE(graphs.accuracy);
    EXPECT_EQ(graphs.accuracy->verdict, "passed");
    const double reference = eager.metrics.at("output_checksum");
    EXPECT_NEAR(graphs.metrics.at("output_checksum"), reference,
                (low_precision ? 1e-2 : 1e-5) * reference);
  }
}

}  // namespace
}  // namespace scalebench
