#include "worker/self_test.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <thread>

#include "common/base/error.h"
#include "protocol/mpi_check.h"
#include "worker/collective_backend.h"
#include "worker/collective_probe.h"
#include "worker/device_selection.h"
#include "worker/gradient_reducer.h"
#include "worker/memory_stats.h"
#include "worker/phase_timer.h"
#include "worker/train_workload.h"

#ifdef SCALEBENCH_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace scalebench {
namespace {

// Note [Self-test checks]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Each check is what a number of `scalebench run` relies on, measured on this allocation:
//   devices      every worker rank has a device of its own (one GPU per rank, or the CPU)
//   collectives  allreduce (in place and into a second buffer), broadcast and allgather of
//                the DDP path's backend give exact results (the probe's check) at small,
//                medium and large sizes
//   ddp          DDP on the workers (GradientReducer over that backend) equals one process
//                training on the global batch: max abs parameter difference <= 1e-5 (fp32)
//   timer        the phase timer of this device agrees with the wall clock within 2 %
//                (CPU: steady_clock marks around sleeps; GPU: CUDA events around kernels)
//   cuda-memory  the peak the results report (peak_allocated_bytes) grows by exactly the
//                bytes a check allocates, as the caching allocator's own counter does
//   oom          an allocation larger than the GPU is caught as an out-of-memory error and
//                the device is usable afterwards (the batch search and `oom` cells rely on
//                it)
// GPU-only checks are `skip` with "no GPU" on CPU. A check whose local part throws
// reports `fail` with the reason; the group agrees on every collective check's outcome
// (MAX over ranks) before the next one, so no rank is left waiting.

constexpr double kDdpTolerance = 1e-5;
constexpr double kTimerTolerance = 0.02;

SelfTestCheck pass(std::string name, std::string detail) {
  return {std::move(name), "pass", std::move(detail)};
}
SelfTestCheck failed(std::string name, std::string detail) {
  return {std::move(name), "fail", std::move(detail)};
}
SelfTestCheck skip(std::string name, std::string detail) {
  return {std::move(name), "skip", std::move(detail)};
}

std::string fixed(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

/// The same check on every rank: the worst rank's outcome (fail > pass > skip) and its
/// detail; a rank's failure names the rank.
SelfTestCheck agree(const SelfTestCheck& mine, int world_rank, MPI_Comm comm) {
  const std::map<std::string, int> order{{"skip", 0}, {"pass", 1}, {"fail", 2}};
  struct {
    int severity;
    int rank;
  } local{order.at(mine.status), world_rank}, worst{};
  MPI_CHECK(MPI_Allreduce(&local, &worst, 1, MPI_2INT, MPI_MAXLOC, comm));
  int group_rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &group_rank));
  // The worst rank's detail travels to everyone: its group rank broadcasts it.
  int owner = worst.rank == world_rank ? group_rank : -1;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &owner, 1, MPI_INT, MPI_MAX, comm));
  std::string detail = mine.detail;
  int length = static_cast<int>(detail.size());
  MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, owner, comm));
  detail.resize(static_cast<size_t>(length));
  MPI_CHECK(MPI_Bcast(detail.data(), length, MPI_CHAR, owner, comm));
  SelfTestCheck out{mine.name,
                    worst.severity == 2   ? "fail"
                    : worst.severity == 1 ? "pass"
                                          : "skip",
                    detail};
  if (out.status == "fail" && detail.find("rank ") != 0) {
    out.detail = "rank " + std::to_string(worst.rank) + ": " + detail;
  }
  return out;
}

SelfTestCheck check_devices(const torch::Device& device, const std::string& problem,
                            const WorkerContext& context, MPI_Comm comm) {
  const std::string mine = problem.empty()
                               ? "rank " + std::to_string(context.world_rank) + " " +
                                     describe(device) + " on " + context.host
                               : "rank " + std::to_string(context.world_rank) + ": " + problem;
  const auto all = allgather_text(comm, mine);
  std::string detail = std::to_string(all.size()) + " worker rank" + (all.size() == 1 ? "" : "s");
  for (const auto& line : all) detail += (&line == &all.front() ? ": " : ", ") + line;
  return agree(problem.empty() ? pass("devices", detail) : failed("devices", mine),
               context.world_rank, comm);
}

SelfTestCheck check_collectives(const WorkerContext& context, const torch::Device& device,
                                MPI_Comm comm) {
  ProbeOptions options;
  options.device = device.is_cuda() ? "cuda" : "cpu";
  options.min_bytes = 8;
  options.max_bytes = device.is_cuda() ? (1LL << 30) : (4LL << 20);
  options.factor = 512;
  options.iterations = 1;
  options.warmup = 0;
  const ProbeReport report = make_collective_probe()->run(options, comm, context);
  std::string sizes;
  std::map<int64_t, bool> seen;
  size_t wrong = 0;
  double worst = 0;
  for (const auto& row : report.rows) {
    wrong += row.ok ? 0 : 1;
    worst = std::max(worst, row.max_error);
    if (row.operation == "allreduce" && row.in_place && !seen[row.bytes]) {
      seen[row.bytes] = true;
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(row.bytes) + " B";
    }
  }
  const std::string what = "allreduce (in place, into a buffer), broadcast, allgather at " + sizes +
                           " over " + std::to_string(report.world_size) + " rank" +
                           (report.world_size == 1 ? "" : "s") + " (" + report.backend + ")";
  if (wrong == 0) return pass("collectives", what + ": every element exact");
  return failed("collectives", std::to_string(wrong) + " of " + std::to_string(report.rows.size()) +
                                   " results wrong (max error " + fixed("%.3g", worst) +
                                   "): " + what);
}

/// Note [Self-test checks], ddp: K SGD steps of DDP on per-rank batches, and of one process
/// on the concatenated global batch, from the same weights.
SelfTestCheck check_ddp(const torch::Device& device, const std::string& backend_name,
                        MPI_Comm comm) {
  int rank = 0;
  int world = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &world));
  if (world < 2) return skip("ddp", "needs 2+ worker ranks (mpirun -np 3 or more)");
  constexpr int kSteps = 3;
  constexpr int64_t kBatch = 8;
  const auto make_model = [&] {
    torch::nn::Sequential model(torch::nn::Linear(32, 64), torch::nn::ReLU(),
                                torch::nn::Linear(64, 64), torch::nn::ReLU(),
                                torch::nn::Linear(64, 4));
    model->to(device);
    return model;
  };
  torch::manual_seed(11);  // the same weights on every rank
  auto model = make_model();
  torch::manual_seed(11);
  auto reference = make_model();
  std::unique_ptr<CollectiveBackend> backend;
#ifdef SCALEBENCH_HAVE_CUDA
  if (backend_name == "nccl") backend = make_nccl_backend(comm, device.index());
#endif
  if (!backend) backend = make_mpi_backend(comm);
  GradientReducer reducer(model->parameters(), *backend, ReducerOptions{4096, 1024});
  torch::manual_seed(12);  // the same data on every rank
  const auto inputs = torch::randn({kSteps, world * kBatch, 32}).to(device);
  const auto targets = torch::randn({kSteps, world * kBatch, 4}).to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD reference_optimizer(reference->parameters(),
                                        torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < kSteps; ++step) {
    optimizer.zero_grad();
    const auto loss = torch::mse_loss(model->forward(inputs[step].narrow(0, rank * kBatch, kBatch)),
                                      targets[step].narrow(0, rank * kBatch, kBatch));
    reducer.prepare_for_backward();
    loss.backward();
    reducer.finalize();
    optimizer.step();
    reference_optimizer.zero_grad();
    torch::mse_loss(reference->forward(inputs[step]), targets[step]).backward();
    reference_optimizer.step();
  }
  double diff = 0;
  const auto params = model->parameters();
  const auto expected = reference->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    diff = std::max(diff, (params[i] - expected[i]).abs().max().item<double>());
  }
  diff = group_max(diff, comm);
  const std::string detail = std::to_string(world) + "-rank DDP (" + backend->name() +
                             ") equals one process on the global batch after " +
                             std::to_string(kSteps) + " steps: max |diff| " + fixed("%.2g", diff) +
                             " (limit " + fixed("%.0e", kDdpTolerance) + ")";
  return diff <= kDdpTolerance ? pass("ddp", detail) : failed("ddp", detail);
}

/// Note [Self-test checks], timer: 5 iterations of a phase around `work`, against the
/// steady clock around the same iterations (with a device sync).
SelfTestCheck check_timer(const std::string& name, const torch::Device& device,
                          const std::function<void()>& work) {
  constexpr size_t kIterations = 5;
  auto timer = make_phase_timer(device, 1, kIterations);
  work();  // warm-up: first-call costs stay out of both measurements
  synchronize_device(device);
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < kIterations; ++i) {
    if (i > 0) timer->next_iteration();
    const PhaseScope phase(*timer, 0);
    work();
  }
  synchronize_device(device);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double timed = 0;
  for (const double seconds : timer->resolve()) timed += seconds;
  const double deviation = std::abs(timed - wall) / wall;
  const std::string detail = std::string(device.is_cuda() ? "CUDA events" : "steady_clock marks") +
                             " " + fixed("%.2f", timed * 1e3) + " ms vs wall clock " +
                             fixed("%.2f", wall * 1e3) + " ms (" + fixed("%.2f", deviation * 100) +
                             " %, limit " + fixed("%.0f", kTimerTolerance * 100) + " %)";
  return deviation <= kTimerTolerance ? pass(name, detail) : failed(name, detail);
}

#ifdef SCALEBENCH_HAVE_CUDA
SelfTestCheck check_cuda_memory(const torch::Device& device) {
  constexpr int64_t kBytes = 64LL << 20;
  const c10::DeviceIndex device_index = device.index();
  const int index = static_cast<unsigned char>(device_index);  // >= 0 for a CUDA device
  synchronize_device(device);
  reset_cuda_peak_memory(index);
  const int64_t before = read_cuda_peak_memory(index).allocated_bytes;
  const auto stats_before = c10::cuda::CUDACachingAllocator::getDeviceStats(device_index);
  int64_t grown = 0;
  int64_t allocator_grown = 0;
  {
    const auto block = torch::empty({kBytes}, torch::TensorOptions(torch::kByte).device(device));
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_index);
    constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    allocator_grown =
        stats.allocated_bytes[kAll].current - stats_before.allocated_bytes[kAll].current;
    grown = read_cuda_peak_memory(index).allocated_bytes - before;
  }
  const std::string detail = "a " + std::to_string(kBytes >> 20) +
                             " MiB tensor: peak_allocated_bytes grew by " + std::to_string(grown) +
                             " B, the allocator's current by " + std::to_string(allocator_grown) +
                             " B";
  return grown == kBytes && allocator_grown == kBytes ? pass("cuda-memory", detail)
                                                      : failed("cuda-memory", detail);
}

SelfTestCheck check_oom(const torch::Device& device) {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    return failed("oom", "cudaMemGetInfo failed");
  }
  const auto too_big = static_cast<int64_t>(total_bytes) * 2;
  bool caught = false;
  try {
    const auto block = torch::empty({too_big}, torch::TensorOptions(torch::kByte).device(device));
  } catch (const c10::OutOfMemoryError&) {
    caught = true;
  }
  c10::cuda::CUDACachingAllocator::emptyCache();
  if (!caught) return failed("oom", "allocating 2x the GPU's memory did not raise out-of-memory");
  const auto after = torch::ones({16LL << 20}, torch::TensorOptions(torch::kFloat).device(device));
  const double sum = after.sum().item<double>();
  const std::string detail = "2x the GPU's " + std::to_string(total_bytes >> 30) +
                             " GiB raised out-of-memory; a 64 MiB tensor afterwards sums to " +
                             fixed("%.0f", sum);
  return sum == static_cast<double>(16LL << 20) ? pass("oom", detail) : failed("oom", detail);
}
#endif

class TorchSelfTest : public SelfTest {
 public:
  std::vector<SelfTestCheck> run(MPI_Comm workers, const WorkerContext& context) override {
    std::vector<SelfTestCheck> checks;
    std::string problem;
    torch::Device device = torch::kCPU;
    try {
      device = select_device(Device::kAuto, context);
      make_current(device);
    } catch (const std::exception& error) {
      problem = error.what();
    }
    checks.push_back(check_devices(device, problem, context, workers));
    if (checks.back().status == "fail") return checks;  // nothing else can run
    const std::string backend = device.is_cuda() ? "nccl" : "mpi";
    checks.push_back(guarded("collectives", context, workers,
                             [&] { return check_collectives(context, device, workers); }));
    checks.push_back(
        guarded("ddp", context, workers, [&] { return check_ddp(device, backend, workers); }));
    checks.push_back(guarded("timer", context, workers, [&] {
      return check_timer("timer", torch::kCPU,
                         [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
    }));
#ifdef SCALEBENCH_HAVE_CUDA
    if (device.is_cuda()) {
      const auto a = torch::randn({2048, 2048}, torch::TensorOptions().device(device));
      checks.push_back(guarded("cuda-timer", context, workers, [&] {
        return check_timer("cuda-timer", device, [&] {
          for (int i = 0; i < 20; ++i) (void)torch::mm(a, a);
        });
      }));
      checks.push_back(
          guarded("cuda-memory", context, workers, [&] { return check_cuda_memory(device); }));
      checks.push_back(guarded("oom", context, workers, [&] { return check_oom(device); }));
      return checks;
    }
#endif
    for (const char* name : {"cuda-timer", "cuda-memory", "oom"}) {
      checks.push_back(
          skip(name, torch::cuda::is_available() ? "this worker runs on the CPU" : "no GPU"));
    }
    return checks;
  }

 private:
  /// Runs `check`; an exception is its `fail`. The group agrees on the outcome.
  static SelfTestCheck guarded(const std::string& name, const WorkerContext& context, MPI_Comm comm,
                               const std::function<SelfTestCheck()>& check) {
    SelfTestCheck mine;
    try {
      mine = check();
    } catch (const std::exception& error) {
      mine = failed(name, error.what());
    }
    return agree(mine, context.world_rank, comm);
  }
};

}  // namespace

std::unique_ptr<SelfTest> make_self_test() { return std::make_unique<TorchSelfTest>(); }

}  // namespace scalebench
