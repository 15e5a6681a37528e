#include "worker/train_workload.h"

#include <chrono>
#include <cmath>
#include <utility>

#include "common/error.h"
#include "common/mpi_check.h"
#include "worker/batch_source.h"
#include "worker/collective_backend.h"
#include "worker/gradient_reducer.h"
#include "worker/synthetic_data.h"

namespace scalebench {
namespace {

enum TrainPhase : size_t { kData, kH2d, kForward, kBackward, kCommWait, kOptimizer, kStep };

const std::vector<std::string>& train_phases() {
  static const std::vector<std::string> names = {"data",      "h2d",       "forward", "backward",
                                                 "comm_wait", "optimizer", "step"};
  return names;
}

class TrainWorkload : public Workload {
 public:
  TrainWorkload(const Assignment& assignment, const torch::Device& device, MPI_Comm group)
      : cell_(assignment.cell),
        device_(device),
        group_(group),
        resolved_(resolve_model(assignment.cell, assignment.artifact)) {
    const CellSpec& cell = assignment.cell;
    check_precision(cell.precision, device);
    MPI_CHECK(MPI_Comm_rank(group, &rank_));
    MPI_CHECK(MPI_Comm_size(group, &world_));
    if (cell.batch_size < 1) throw InputError("batch_size must be >= 1 for training");
    const auto start = std::chrono::steady_clock::now();
    torch::manual_seed(cell.seed);
    model_ = resolved_.info->build(resolved_.input_shape, resolved_.num_classes);
    model_->to(device);
    if (cell.channels_last) module_to_channels_last(*model_);
    model_->train();
    optimizer_ = make_optimizer(cell.optimizer, model_->parameters());
    synchronize_device(device);
    model_init_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    data_ = make_batch_source(cell, *resolved_.info, resolved_.input_shape, resolved_.num_classes,
                              assignment.tree, cell.pinned_memory && device.is_cuda());
  }

  const std::vector<std::string>& phases() const override { return train_phases(); }
  int64_t warmup_iterations() const override { return cell_.warmup_iterations; }
  int64_t measured_iterations() const override { return cell_.measured_iterations; }
  bool lockstep() const override { return world_ > 1; }

  void connect() override {
    if (world_ == 1) return;
    const Backend backend = resolve_backend(cell_.backend, device_);
#ifdef SCALEBENCH_HAVE_CUDA
    if (backend == Backend::kNccl) backend_ = make_nccl_backend(group_, device_.index());
#endif
    if (backend == Backend::kMpi) backend_ = make_mpi_backend(group_);
    reducer_ = std::make_unique<GradientReducer>(
        model_->parameters(), *backend_,
        ReducerOptions{cell_.bucket_bytes, cell_.first_bucket_bytes});
    reducer_->broadcast_parameters(model_->buffers());
  }

  void run_iteration(int64_t iteration, PhaseTimer& timer) override {
    PhaseScope step(timer, kStep);
    HostBatch host;
    {
      PhaseScope phase(timer, kData);
      const int64_t first = train_first_sample(iteration, rank_, world_, cell_.batch_size);
      host = data_->make_batch({first, cell_.batch_size});
    }
    torch::Tensor inputs, targets;
    {
      PhaseScope phase(timer, kH2d);
      inputs = host.inputs.to(device_, /*non_blocking=*/true);
      targets = host.targets.to(device_, /*non_blocking=*/true);
      if (cell_.channels_last) inputs = to_channels_last(inputs);
    }
    torch::Tensor loss;
    {
      PhaseScope phase(timer, kForward);
      AutocastScope autocast(cell_.precision, device_);
      loss = task_loss(model_->forward(inputs), targets);
    }
    {
      PhaseScope phase(timer, kBackward);
      if (reducer_) reducer_->prepare_for_backward();
      loss.backward();
    }
    {
      PhaseScope phase(timer, kCommWait);
      if (reducer_) reducer_->finalize();
    }
    {
      PhaseScope phase(timer, kOptimizer);
      optimizer_->step();
      optimizer_->zero_grad(/*set_to_none=*/true);
    }
    last_loss_ = loss.detach();
  }

  bool abort_collectives() override {
    // backend_ is set by connect(), before the watchdog that calls this starts.
    return backend_ != nullptr && backend_->abort();
  }

  void add_metrics(std::map<std::string, double>& metrics) override {
    metrics["final_loss"] = last_loss_.defined() ? last_loss_.item<double>() : NAN;
    metrics["param_checksum"] = parameter_checksum(*model_);
    metrics["model_init_s"] = model_init_s_;
    metrics["parameter_count"] = static_cast<double>(parameter_count(*model_));
    metrics.merge(data_->metrics());
    // TorchScript models have no analytic FLOP count: the metrics are left out.
    if (resolved_.info->forward_flops_per_sample) {
      const double forward_flops =
          resolved_.info->forward_flops_per_sample(resolved_.input_shape, resolved_.num_classes);
      metrics["flops_per_sample"] = forward_flops;
      metrics["train_flops_per_sample"] = kTrainFlopsFactor * forward_flops;
    }
  }

 private:
  CellSpec cell_;
  torch::Device device_;
  MPI_Comm group_;
  ResolvedModel resolved_;
  int rank_ = 0;
  int world_ = 1;
  std::shared_ptr<models::ZooModel> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<BatchSource> data_;
  std::unique_ptr<CollectiveBackend> backend_;  // declared before reducer_: outlives it
  std::unique_ptr<GradientReducer> reducer_;
  torch::Tensor last_loss_;
  double model_init_s_ = 0.0;
};

}  // namespace

Backend resolve_backend(Backend requested, const torch::Device& device) {
  if (requested == Backend::kAuto) return device.is_cuda() ? Backend::kNccl : Backend::kMpi;
  if (requested == Backend::kNccl) {
    if (!device.is_cuda()) {
      throw CellError(FailurePhase::kConnect,
                      "backend nccl needs a CUDA device, this cell runs on " + device.str() +
                          ": use backend mpi or auto");
    }
#ifndef SCALEBENCH_HAVE_CUDA
    throw CellError(FailurePhase::kConnect,
                    "backend nccl is not compiled into this build: use backend mpi");
#endif
  }
  return requested;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerSpec& spec,
                                                        std::vector<torch::Tensor> parameters) {
  if (spec.name == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        std::move(parameters),
        torch::optim::SGDOptions(spec.lr).momentum(spec.momentum).weight_decay(spec.weight_decay));
  }
  if (spec.name == "adam") {
    return std::make_unique<torch::optim::Adam>(
        std::move(parameters), torch::optim::AdamOptions(spec.lr).weight_decay(spec.weight_decay));
  }
  if (spec.name == "adamw") {
    return std::make_unique<torch::optim::AdamW>(
        std::move(parameters), torch::optim::AdamWOptions(spec.lr).weight_decay(spec.weight_decay));
  }
  throw InputError("unknown optimizer \"" + spec.name + "\": use sgd, adam or adamw");
}

std::unique_ptr<Workload> make_train_workload(const Assignment& assignment,
                                              const torch::Device& device, MPI_Comm group) {
  return std::make_unique<TrainWorkload>(assignment, device, group);
}

}  // namespace scalebench
