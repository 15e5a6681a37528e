#include "worker/infer_workload.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "common/mpi_check.h"
#include "worker/batch_source.h"
#include "worker/checkpoint.h"
#include "worker/synthetic_data.h"

namespace scalebench {
namespace {

enum InferPhase : size_t { kLoad, kH2d, kForward, kD2h, kBatch };

const std::vector<std::string>& infer_phases() {
  static const std::vector<std::string> names = {"load", "h2d", "forward", "d2h", "batch"};
  return names;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Weight of global sample i in the output checksum: 1 + (i mod 97) / 97.
torch::Tensor sample_weights(int64_t first, int64_t count, const torch::Device& device) {
  return torch::arange(first, first + count, torch::TensorOptions(torch::kDouble).device(device))
      .remainder_(97)
      .div_(97)
      .add_(1);
}

class InferWorkload : public Workload {
 public:
  InferWorkload(const Assignment& assignment, const torch::Device& device, MPI_Comm group)
      : cell_(assignment.cell),
        device_(device),
        resolved_(resolve_model(assignment.cell, assignment.artifact)) {
    const CellSpec& cell = assignment.cell;
    check_precision(cell.precision, device);
    if (cell.batch_size < 1) throw InputError("batch_size must be >= 1 for inference");
    int rank = 0, world = 1;
    MPI_CHECK(MPI_Comm_rank(group, &rank));
    MPI_CHECK(MPI_Comm_size(group, &world));
    rank_ = rank;
    samples_ = inference_samples(cell);
    shard_ = shard_range(samples_, rank, world);
    batches_ = (shard_.count + cell.batch_size - 1) / cell.batch_size;

    const auto start = std::chrono::steady_clock::now();
    torch::manual_seed(cell.seed);
    model_ = resolved_.info->build(resolved_.input_shape, resolved_.num_classes);
    if (!cell.checkpoint.empty()) {
      const auto load_start = std::chrono::steady_clock::now();
      load_state_dict(model_->state_entries(),
                      resolve_in_tree(assignment.tree, cell.checkpoint).string());
      checkpoint_load_s_ = seconds_since(load_start);
    }
    model_->to(device);
    if (cell.channels_last) module_to_channels_last(*model_);
    model_->eval();
    synchronize_device(device);
    model_init_s_ = seconds_since(start);
    data_ = make_batch_source(cell, *resolved_.info, resolved_.input_shape, resolved_.num_classes,
                              assignment.tree, cell.pinned_memory && device.is_cuda());
    checksum_ = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(device));
  }

  const std::vector<std::string>& phases() const override { return infer_phases(); }
  int64_t warmup_iterations() const override { return cell_.warmup_iterations; }
  int64_t measured_iterations() const override { return batches_; }
  bool lockstep() const override { return false; }

  void run_iteration(int64_t iteration, PhaseTimer& timer) override {
    torch::NoGradGuard no_grad;
    const SampleRange range = batch_range(iteration);
    torch::Tensor output;
    {
      PhaseScope batch(timer, kBatch);
      HostBatch host;
      {
        PhaseScope phase(timer, kLoad);
        host = data_->make_batch(range);
      }
      torch::Tensor inputs;
      {
        PhaseScope phase(timer, kH2d);
        inputs = host.inputs.to(device_, /*non_blocking=*/true);
        if (cell_.channels_last) inputs = to_channels_last(inputs);
      }
      {
        PhaseScope phase(timer, kForward);
        AutocastScope autocast(cell_.precision, device_);
        output = model_->forward(inputs);
      }
      {
        PhaseScope phase(timer, kD2h);
        if (device_.is_cuda()) {
          auto host_output = torch::empty(output.sizes(),
                                          output.options().device(torch::kCPU).pinned_memory(true));
          host_output.copy_(output, /*non_blocking=*/true);
        }
      }
    }
    if (iteration >= cell_.warmup_iterations) accumulate_checksum(output, range);
  }

  void add_metrics(std::map<std::string, double>& metrics) override {
    metrics["output_checksum"] = checksum_.item<double>();
    metrics["model_init_s"] = model_init_s_;
    if (!cell_.checkpoint.empty()) metrics["checkpoint_load_s"] = checkpoint_load_s_;
    metrics["parameter_count"] = static_cast<double>(parameter_count(*model_));
    metrics.merge(data_->metrics());
    if (resolved_.info->forward_flops_per_sample) {  // none for TorchScript models
      metrics["flops_per_sample"] =
          resolved_.info->forward_flops_per_sample(resolved_.input_shape, resolved_.num_classes);
    }
    metrics["samples"] = static_cast<double>(shard_.count);
    metrics["dataset_samples"] = static_cast<double>(samples_);
    metrics["shard_first_sample"] = static_cast<double>(shard_.first);
  }

 private:
  SampleRange batch_range(int64_t iteration) const {
    const int64_t batch = cell_.batch_size;
    if (iteration < cell_.warmup_iterations) {
      return {samples_ + (rank_ * cell_.warmup_iterations + iteration) * batch, batch};
    }
    const int64_t first = shard_.first + (iteration - cell_.warmup_iterations) * batch;
    return {first, std::min(batch, shard_.first + shard_.count - first)};
  }

  /// Outside every phase: sum over samples of weight(i) * sum |output_i| (device side).
  void accumulate_checksum(const torch::Tensor& output, SampleRange range) {
    const auto per_sample = output.detach().to(torch::kDouble).abs().flatten(1).sum(1);
    checksum_.add_((per_sample * sample_weights(range.first, range.count, device_)).sum());
  }

  CellSpec cell_;
  torch::Device device_;
  ResolvedModel resolved_;
  int64_t rank_ = 0;
  int64_t samples_ = 0;
  SampleRange shard_;
  int64_t batches_ = 0;
  std::shared_ptr<models::ZooModel> model_;
  std::unique_ptr<BatchSource> data_;
  torch::Tensor checksum_;
  double model_init_s_ = 0.0;
  double checkpoint_load_s_ = 0.0;
};

}  // namespace

int64_t inference_samples(const CellSpec& cell) {
  return cell.samples > 0 ? cell.samples
                          : cell.batch_size * cell.world_size * cell.measured_iterations;
}

std::unique_ptr<Workload> make_infer_workload(const Assignment& assignment,
                                              const torch::Device& device, MPI_Comm group) {
  return std::make_unique<InferWorkload>(assignment, device, group);
}

}  // namespace scalebench
