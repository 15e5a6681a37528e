#include "worker/collective_probe.h"

#include <torch/torch.h>

#include <chrono>
#include <numeric>
#include <optional>

#include "common/base/error.h"
#include "protocol/mpi_check.h"
#include "worker/collective_backend.h"
#include "worker/device_selection.h"
#include "worker/train_workload.h"
#include "worker/workload.h"

namespace scalebench {
namespace {

constexpr int64_t kCpuMaxBytes = 16LL << 20;
constexpr int64_t kGpuMaxBytes = 1LL << 30;

void check_operations(const std::vector<std::string>& operations) {
  for (const auto& op : operations) {
    if (op != "allreduce" && op != "broadcast" && op != "allgather") {
      throw InputError("--ops " + op + ": use allreduce, broadcast and/or allgather");
    }
  }
}

/// One (operation, placement, size) of the probe on this rank's buffers.
class Measurement {
 public:
  Measurement(CollectiveBackend& backend, const torch::Device& device, std::string operation,
              bool in_place, int64_t bytes)
      : backend_(backend), device_(device), op_(std::move(operation)), in_place_(in_place) {
    const int64_t size = backend.size();
    const int64_t total = std::max<int64_t>(1, bytes / 4);
    elements_ = op_ == "allgather" ? std::max<int64_t>(1, total / size) : total;
    const auto options = torch::TensorOptions(torch::kFloat).device(device);
    input_ = torch::zeros({elements_}, options);  // zeros: repeated sums stay finite
    if (op_ == "allgather") {
      output_ = torch::zeros({elements_ * size}, options);
    } else if (op_ == "allreduce" && !in_place) {
      output_ = torch::zeros({elements_}, options);
    }
  }

  [[nodiscard]] int64_t elements() const { return elements_; }
  [[nodiscard]] int64_t bytes() const {
    return 4 * (op_ == "allgather" ? elements_ * backend_.size() : elements_);
  }

  void call() {
    if (op_ == "allreduce" && in_place_) {
      backend_.allreduce_sum(input_)->wait();
    } else if (op_ == "allreduce") {
      backend_.allreduce_sum_into(input_, output_);
    } else if (op_ == "broadcast") {
      backend_.broadcast(input_, 0);
    } else {
      backend_.allgather(input_, output_);
    }
  }

  /// Per call, this rank: `warmup` untimed calls, a barrier, `iterations` timed ones.
  double time_per_call(int warmup, int iterations, MPI_Comm comm) {
    for (int i = 0; i < warmup; ++i) call();
    synchronize_device(device_);
    MPI_CHECK(MPI_Barrier(comm));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) call();
    synchronize_device(device_);
    return seconds_since(start) / iterations;
  }

  /// Largest deviation of this rank's result from the exact one (Note [Probe figures]).
  double check(bool corrupt) {
    const int64_t rank = backend_.rank();
    const int64_t size = backend_.size();
    const auto pattern =
        torch::arange(elements_, torch::TensorOptions(torch::kLong).device(device_))
            .remainder_(7)
            .add_(1)
            .to(torch::kFloat);
    input_.copy_(pattern * static_cast<float>(rank + 1));
    if (corrupt) input_.narrow(0, 0, 1).add_(1.0F);
    if (output_.defined()) output_.zero_();
    call();
    torch::Tensor result = output_.defined() ? output_ : input_;
    torch::Tensor expected;
    if (op_ == "allreduce") {
      const int64_t rank_sum = size * (size + 1) / 2;  // 1 + 2 + ... + size, exact
      expected = pattern * static_cast<float>(rank_sum);
    } else if (op_ == "broadcast") {
      expected = pattern;
    } else {
      const auto ranks = torch::arange(1, size + 1, pattern.options()).repeat_interleave(elements_);
      expected = pattern.repeat({size}) * ranks;
    }
    return (result - expected).abs().max().item<double>();
  }

 private:
  CollectiveBackend& backend_;
  torch::Device device_;
  std::string op_;
  bool in_place_;
  int64_t elements_ = 0;
  torch::Tensor input_;
  torch::Tensor output_;
};

/// A plain MPI_Allreduce loop on host buffers of `elements` floats: the baseline of the MPI
/// backend (per call, this rank).
double plain_mpi_allreduce(int64_t elements, bool in_place, int warmup, int iterations,
                           MPI_Comm comm) {
  std::vector<float> send(static_cast<size_t>(elements), 0.0F);
  std::vector<float> receive(in_place ? 0 : static_cast<size_t>(elements), 0.0F);
  const int count = static_cast<int>(elements);
  const auto once = [&] {
    if (in_place) {
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, send.data(), count, MPI_FLOAT, MPI_SUM, comm));
    } else {
      MPI_CHECK(MPI_Allreduce(send.data(), receive.data(), count, MPI_FLOAT, MPI_SUM, comm));
    }
  };
  for (int i = 0; i < warmup; ++i) once();
  MPI_CHECK(MPI_Barrier(comm));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) once();
  return seconds_since(start) / iterations;
}

class TorchCollectiveProbe : public CollectiveProbe {
 public:
  ProbeReport run(const ProbeOptions& requested, MPI_Comm workers,
                  const WorkerContext& context) override {
    check_operations(requested.operations);
    const std::optional<Device> requested_device = parse_device(requested.device);
    if (!requested_device)
      throw InputError("--device " + requested.device + ": use auto, cpu or cuda");
    const std::optional<Backend> requested_backend = parse_backend(requested.backend);
    if (!requested_backend) {
      throw InputError("--backend " + requested.backend + ": use auto, mpi or nccl");
    }
    if (requested.iterations < 1 || requested.warmup < 0) {
      throw InputError("--iterations must be >= 1 and --warmup >= 0");
    }
    // Every rank decides its device before any collective; a rank that cannot use it must
    // not leave the others waiting: the group agrees first.
    std::string problem;
    torch::Device device = torch::kCPU;
    Backend backend_kind = Backend::kMpi;
    try {
      device = select_device(*requested_device, context);
      make_current(device);
      backend_kind = resolve_backend(*requested_backend, device);
    } catch (const std::exception& error) {
      problem = error.what();
    }
    int failed = problem.empty() ? 0 : 1;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, workers));
    if (!problem.empty())
      throw InputError("rank " + std::to_string(context.world_rank) + ": " + problem);
    if (failed != 0) throw InputError("another worker rank cannot run the probe (see its log)");

    ProbeOptions options = requested;
    if (options.max_bytes == 0) options.max_bytes = device.is_cuda() ? kGpuMaxBytes : kCpuMaxBytes;
    const std::vector<int64_t> sizes = probe_sizes(options);

    std::unique_ptr<CollectiveBackend> backend;
#ifdef SCALEBENCH_HAVE_CUDA
    if (backend_kind == Backend::kNccl) backend = make_nccl_backend(workers, device.index());
#endif
    if (!backend) backend = make_mpi_backend(workers);

    ProbeReport report;
    report.backend = backend->name();
    report.world_size = backend->size();
    report.iterations = options.iterations;
    report.warmup = options.warmup;
    report.hosts = allgather_text(workers, context.host);
    report.devices = allgather_text(workers, describe(device));
    report.device = report.devices.front();
    for (const auto& op : options.operations) {
      for (const bool in_place :
           op == "allreduce" ? std::vector<bool>{true, false} : std::vector<bool>{true}) {
        for (const int64_t bytes : sizes) {
          report.rows.push_back(measure(*backend, device, op, in_place, bytes, options, workers));
        }
      }
    }
    return report;
  }

 private:
  static ProbeRow measure(CollectiveBackend& backend, const torch::Device& device,
                          const std::string& op, bool in_place, int64_t bytes,
                          const ProbeOptions& options, MPI_Comm workers) {
    Measurement measurement(backend, device, op, in_place, bytes);
    ProbeRow row;
    row.operation = op;
    row.in_place = in_place;
    row.elements = measurement.elements();
    row.bytes = measurement.bytes();
    row.time_s =
        group_max(measurement.time_per_call(options.warmup, options.iterations, workers), workers);
    row.algbw_gb_s = static_cast<double>(row.bytes) / row.time_s / 1e9;
    row.busbw_gb_s = row.algbw_gb_s * busbw_factor(op, backend.size());
    row.max_error = group_max(measurement.check(backend.rank() == options.corrupt_rank), workers);
    row.ok = row.max_error == 0.0;
    if (backend.name() == "mpi" && op == "allreduce" && row.elements <= INT32_MAX) {
      row.baseline_time_s = group_max(
          plain_mpi_allreduce(row.elements, in_place, options.warmup, options.iterations, workers),
          workers);
    }
    return row;
  }
};

}  // namespace

double group_max(double value, MPI_Comm comm) {
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, comm));
  return value;
}

std::vector<std::string> allgather_text(MPI_Comm comm, const std::string& text) {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  const int length = static_cast<int>(text.size());
  std::vector<int> lengths(static_cast<size_t>(size));
  MPI_CHECK(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  std::vector<int> offsets(static_cast<size_t>(size), 0);
  std::partial_sum(lengths.begin(), lengths.end() - 1, offsets.begin() + 1);
  std::string all(static_cast<size_t>(offsets.back() + lengths.back()), '\0');
  MPI_CHECK(MPI_Allgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(),
                           offsets.data(), MPI_CHAR, comm));
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                             static_cast<size_t>(lengths[static_cast<size_t>(r)])));
  }
  return out;
}

std::unique_ptr<CollectiveProbe> make_collective_probe() {
  return std::make_unique<TorchCollectiveProbe>();
}

}  // namespace scalebench
