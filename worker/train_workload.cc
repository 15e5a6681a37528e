#include "worker/train_workload.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <utility>

#include "common/base/error.h"
#include "common/cell/output_comparison.h"
#include "protocol/mpi_check.h"
#include "worker/accuracy_sums.h"
#include "worker/batch_source.h"
#include "worker/collective_backend.h"
#include "worker/gradient_reducer.h"
#include "worker/synthetic_data.h"

namespace scalebench {

const std::vector<std::string>& train_phases() {
  static const std::vector<std::string> names = {"data",      "h2d",       "forward", "backward",
                                                 "comm_wait", "optimizer", "step"};
  return names;
}

namespace {

/// ||p - p_ref|| / ||p_ref|| over every parameter of the two models (same architecture).
double parameter_distance(torch::nn::Module& model, torch::nn::Module& reference) {
  torch::NoGradGuard no_grad;
  const auto params = model.parameters();
  const auto expected = reference.parameters();
  double diff_sq = 0.0;
  double ref_sq = 0.0;
  for (size_t i = 0; i < params.size() && i < expected.size(); ++i) {
    const auto p = params[i].detach().to(torch::kDouble);
    const auto r = expected[i].detach().to(torch::kDouble);
    diff_sq += (p - r).pow(2).sum().item<double>();
    ref_sq += r.pow(2).sum().item<double>();
  }
  return ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
}

/// One sample's output shape (no batch dimension): a forward pass of a zero sample on
/// `device` in eval mode without autograd, the training mode restored. See Note [Targets].
std::vector<int64_t> sample_output_shape(models::ZooModel& model, const ResolvedModel& resolved,
                                         const torch::Device& device) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> sizes = {1};
  sizes.insert(sizes.end(), resolved.input_shape.begin(), resolved.input_shape.end());
  const bool training = model.is_training();
  model.eval();
  const torch::Tensor output = model.forward(
      torch::zeros(sizes, torch::TensorOptions(resolved.info->input_dtype).device(device)));
  model.train(training);
  if (output.dim() < 1 || output.size(0) != 1) {
    throw CellError(FailurePhase::kForward,
                    "the model returned " + shape_text(output.sizes().vec()) +
                        " for a batch of one sample: a float loss needs outputs [B, ...] with "
                        "the batch first (docs/own-model.md#losses)");
  }
  return {output.sizes().begin() + 1, output.sizes().end()};
}

class TrainWorkload : public Workload {
 public:
  TrainWorkload(const Assignment& assignment, const torch::Device& device, MPI_Comm group)
      : cell_(assignment.cell),
        device_(device),
        group_(group),
        resolved_(resolve_model(assignment.cell, assignment.artifact)),
        loss_(parse_loss(assignment.cell.loss)),
        keep_losses_(assignment.cell.validate) {
    const CellSpec& cell = assignment.cell;
    if (cell.validate) assignment_ = assignment;  // the reference is built from it
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
    const std::vector<int64_t> output_shape = has_float_targets(loss_)
                                                  ? sample_output_shape(*model_, resolved_, device)
                                                  : std::vector<int64_t>{};
    data_ = make_batch_source(cell, *resolved_.info, resolved_.input_shape,
                              cell_targets(cell, *resolved_.info, resolved_.input_shape,
                                           resolved_.num_classes, output_shape),
                              assignment.tree, cell.pinned_memory && device.is_cuda());
  }

  const std::vector<std::string>& phases() const override { return train_phases(); }
  int64_t warmup_iterations() const override { return planned_warmup_iterations(cell_); }
  int64_t measured_iterations() const override { return planned_measured_iterations(cell_); }
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
    PhaseScope step(timer, TrainPhase::kStep);
    HostBatch host;
    {
      PhaseScope phase(timer, TrainPhase::kData);
      const int64_t first = train_first_sample(iteration, rank_, world_, cell_.batch_size);
      host = data_->make_batch({first, cell_.batch_size});
    }
    torch::Tensor inputs, targets;
    {
      PhaseScope phase(timer, TrainPhase::kH2d);
      inputs = host.inputs.to(device_, /*non_blocking=*/true);
      targets = host.targets.to(device_, /*non_blocking=*/true);
      if (cell_.channels_last) inputs = to_channels_last(inputs);
    }
    torch::Tensor loss;
    {
      PhaseScope phase(timer, TrainPhase::kForward);
      AutocastScope autocast(cell_.precision, device_);
      loss = task_loss(model_->forward(inputs), targets, loss_);
    }
    {
      PhaseScope phase(timer, TrainPhase::kBackward);
      if (reducer_) reducer_->prepare_for_backward();
      loss.backward();
    }
    {
      PhaseScope phase(timer, TrainPhase::kCommWait);
      if (reducer_) reducer_->finalize();
    }
    {
      PhaseScope phase(timer, TrainPhase::kOptimizer);
      optimizer_->step();
      optimizer_->zero_grad(/*set_to_none=*/true);
    }
    last_loss_ = loss.detach();
    if (keep_losses_) {
      losses_.push_back(last_loss_);  // a handle: no copy, no sync
      iterations_run_.push_back(iteration);
    }
  }

  /// Note [Accuracy validation]: the same steps from the same initial weights and batches in
  /// the reference settings, on the same group; per-step losses and final parameters. Where
  /// a check fails, a second reference measures the reference's own spread (Note [Reference
  /// spread]).
  AccuracyReport validate(std::map<std::string, double>& metrics) override {
    const auto start = std::chrono::steady_clock::now();
    const ReferenceMathScope fp32;
    const auto reference = run_reference();
    const size_t steps = std::min(losses_.size(), reference->losses_.size());
    if (steps == 0) throw CellError(FailurePhase::kValidation, "no training step to compare");
    const std::array<double, 2> worst = deviation_from(*reference, steps);
    std::array<double, 2> final_losses = {losses_[steps - 1].item<double>(),
                                          reference->losses_[steps - 1].item<double>()};
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, final_losses.data(), 2, MPI_DOUBLE, MPI_SUM, group_));
    TrainingComparison comparison;
    comparison.steps = static_cast<int64_t>(steps);
    comparison.samples_per_step = static_cast<double>(cell_.batch_size) * world_;
    comparison.max_loss_rel_deviation = worst[0];
    comparison.param_rel_distance = worst[1];
    comparison.final_loss = final_losses[0] / world_;
    comparison.reference_final_loss = final_losses[1] / world_;
    // Every rank holds the same reduced figures, so every rank decides alike.
    if (worst[0] > cell_.tolerance || worst[1] > cell_.tolerance) {
      reference->release_training_state();  // two references' optimizers would not fit
      const auto again = run_reference();
      const std::array<double, 2> spread = again->deviation_from(*reference, steps);
      comparison.reference_loss_spread = spread[0];
      comparison.reference_param_spread = spread[1];
    }
    metrics["validation_s"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return finish_training(comparison, cell_.tolerance);
  }

  bool abort_collectives() override {
    // backend_ is set by connect(), before the watchdog that calls this starts.
    return backend_ != nullptr && backend_->abort();
  }

  [[nodiscard]] std::vector<BucketTiming> last_bucket_timings() const override {
    return reducer_ ? reducer_->last_iteration_stats().buckets : std::vector<BucketTiming>{};
  }

  void add_metrics(std::map<std::string, double>& metrics) override {
    metrics["final_loss"] = last_loss_.defined() ? last_loss_.item<double>() : NAN;
    metrics["param_checksum"] = parameter_checksum(*model_);
    // Note [CPU oversubscription]: the MPI backend's communication thread (Note [MPI
    // communication thread]) runs when MPI granted MPI_THREAD_MULTIPLE.
    int provided = MPI_THREAD_SINGLE;
    MPI_CHECK(MPI_Query_thread(&provided));
    metrics["mpi_comm_threads"] =
        backend_ && backend_->name() == "mpi" && provided == MPI_THREAD_MULTIPLE ? 1.0 : 0.0;
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
  /// The cell's steps again in the reference settings (reference_cell), from the same
  /// initial weights and batches, on the same group; every loss kept. The caller holds a
  /// ReferenceMathScope.
  std::unique_ptr<TrainWorkload> run_reference() {
    Assignment reference_assignment = assignment_;
    reference_assignment.cell = reference_cell(cell_);
    auto reference = std::make_unique<TrainWorkload>(reference_assignment, device_, group_);
    reference->keep_losses_ = true;
    reference->connect();
    // The very iterations the cell ran, in order: with `iterations: auto` or `warmup: auto`
    // (Note [Iterations auto]) their count and indices were decided by the group, not
    // planned. Every rank ran the same ones (training is lockstep), so the reference's
    // collectives match. Untimed: the timer only takes the phases' marks.
    const auto timer = make_phase_timer(device_, reference->phases().size(),
                                        std::max<size_t>(iterations_run_.size(), 1));
    for (const int64_t iteration : iterations_run_) {
      reference->run_iteration(iteration, *timer);
      timer->next_iteration();
    }
    synchronize_device(device_);
    return reference;
  }

  /// Frees what only further steps need (optimizer state, gradient buckets, the data
  /// source, gradients): the losses and parameters stay, for comparisons.
  void release_training_state() {
    optimizer_.reset();
    reducer_.reset();
    data_.reset();
    for (auto& parameter : model_->parameters()) parameter.mutable_grad() = torch::Tensor();
  }

  /// MAX over the group of {the largest relative loss deviation of the first `steps` steps,
  /// the relative parameter distance} of this run from `other`. Collective over the group.
  std::array<double, 2> deviation_from(TrainWorkload& other, size_t steps) {
    std::array<double, 2> worst = {0.0, parameter_distance(*model_, *other.model_)};
    for (size_t step = 0; step < std::min({steps, losses_.size(), other.losses_.size()}); ++step) {
      const double loss = losses_[step].item<double>();
      const double expected = other.losses_[step].item<double>();
      worst[0] =
          std::max(worst[0], std::abs(loss - expected) / std::max(std::abs(expected), 1e-30));
    }
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, worst.data(), 2, MPI_DOUBLE, MPI_MAX, group_));
    return worst;
  }

  CellSpec cell_;
  torch::Device device_;
  MPI_Comm group_;
  ResolvedModel resolved_;
  Loss loss_;
  int rank_ = 0;
  int world_ = 1;
  std::shared_ptr<models::ZooModel> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<BatchSource> data_;
  std::unique_ptr<CollectiveBackend> backend_;  // declared before reducer_: outlives it
  std::unique_ptr<GradientReducer> reducer_;
  torch::Tensor last_loss_;
  double model_init_s_ = 0.0;
  // Note [Accuracy validation]
  bool keep_losses_ = false;             ///< keep every step's loss (validate, and the reference)
  std::vector<torch::Tensor> losses_;    ///< per step run, warm-up included (device tensors)
  std::vector<int64_t> iterations_run_;  ///< with losses_: the iteration index of each step
  Assignment assignment_;                ///< validate only: what the reference is built from
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
