#include "worker/infer_workload.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "common/base/error.h"
#include "protocol/mpi_check.h"
#include "worker/accuracy_sums.h"
#include "worker/batch_source.h"
#include "worker/checkpoint.h"
#include "worker/compiled_twin.h"
#include "worker/cuda_graph_forward.h"
#include "worker/synthetic_data.h"

namespace scalebench {
namespace {

/// The phases of an inference batch, as indices of the phase timer (scoped: Note [Unity build]).
struct InferPhase {
  enum Index : size_t { kLoad, kH2d, kForward, kD2h, kBatch };
};

const std::vector<std::string>& infer_phases() {
  static const std::vector<std::string> names = {"load", "h2d", "forward", "d2h", "batch"};
  return names;
}

/// Whether the cell's model loads its checkpoint: not a compiled twin, whose weights are
/// the checkpoint's already (Note [Compiled twins]).
bool loads_checkpoint(const CellSpec& cell) {
  return !cell.checkpoint.empty() && cell.compile == CellSpec{}.compile;
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
        tree_(assignment.tree),
        device_(device),
        group_(group),
        resolved_(resolve_model(assignment.cell, assignment.artifact)) {
    const CellSpec& cell = assignment.cell;
    check_precision(cell.precision, device);
    if (cell.batch_size < 1) throw InputError("batch_size must be >= 1 for inference");
    int rank = 0, world = 1;
    MPI_CHECK(MPI_Comm_rank(group, &rank));
    MPI_CHECK(MPI_Comm_size(group, &world));
    rank_ = rank;
    world_ = world;
    samples_ = inference_samples(cell);
    shard_ = shard_range(samples_, rank, world);
    batches_ = (shard_.count + cell.batch_size - 1) / cell.batch_size;

    const auto start = std::chrono::steady_clock::now();
    torch::manual_seed(cell.seed);
    model_ = resolved_.info->build(resolved_.input_shape, resolved_.num_classes);
    // A compiled twin was exported from the checkpoint's weights (Note [Compiled twins]).
    if (loads_checkpoint(cell)) {
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
    // Note [Targets]: inference reads no targets (the output shape is not needed).
    data_ = make_batch_source(cell, *resolved_.info, resolved_.input_shape,
                              cell_targets(cell, *resolved_.info, resolved_.input_shape,
                                           resolved_.num_classes, /*output_shape=*/{}),
                              assignment.tree, cell.pinned_memory && device.is_cuda());
    checksum_ = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(device));
    if (cell.cuda_graphs) capture_graphs();
  }

  const std::vector<std::string>& phases() const override { return infer_phases(); }
  int64_t warmup_iterations() const override { return warmup_; }
  int64_t measured_iterations() const override { return batches_; }
  bool lockstep() const override { return false; }

  void run_iteration(int64_t iteration, PhaseTimer& timer) override {
    torch::NoGradGuard no_grad;
    const SampleRange range = batch_range(iteration);
    CapturedForward* graph = graph_for(range.count);  // nullptr: eager
    torch::Tensor output;
    {
      PhaseScope batch(timer, InferPhase::kBatch);
      HostBatch host;
      {
        PhaseScope phase(timer, InferPhase::kLoad);
        host = data_->make_batch(range);
      }
      torch::Tensor inputs;
      {
        PhaseScope phase(timer, InferPhase::kH2d);
        if (graph != nullptr) {
          graph->input().copy_(host.inputs, /*non_blocking=*/true);  // layout included
        } else {
          inputs = host.inputs.to(device_, /*non_blocking=*/true);
          if (cell_.channels_last) inputs = to_channels_last(inputs);
        }
      }
      {
        PhaseScope phase(timer, InferPhase::kForward);
        if (graph != nullptr) {
          output = graph->replay();
        } else {
          AutocastScope autocast(cell_.precision, device_);
          output = model_->forward(inputs);
        }
      }
      {
        PhaseScope phase(timer, InferPhase::kD2h);
        if (device_.is_cuda()) {
          auto host_output = torch::empty(output.sizes(),
                                          output.options().device(torch::kCPU).pinned_memory(true));
          host_output.copy_(output, /*non_blocking=*/true);
        }
      }
    }
    if (iteration >= warmup_) {
      keep_for_checksum(output, range, graph != nullptr);
      measured_samples_ += range.count;
    }
  }

  void add_metrics(std::map<std::string, double>& metrics) override {
    for (const auto& [output, range] : kept_outputs_) accumulate_checksum(output, range);
    kept_outputs_.clear();
    metrics["output_checksum"] = checksum_.item<double>();
    metrics["model_init_s"] = model_init_s_;
    if (loads_checkpoint(cell_)) metrics["checkpoint_load_s"] = checkpoint_load_s_;
    // An AOTInductor package's weights are compiled in: it has no parameters to count.
    if (!runs_aoti_package(cell_)) {
      metrics["parameter_count"] = static_cast<double>(parameter_count(*model_));
    }
    metrics.merge(data_->metrics());
    if (resolved_.info->forward_flops_per_sample) {  // none for TorchScript models
      // NaN: an AOTInductor package that records no count (absent, never guessed).
      if (const double flops = resolved_.info->forward_flops_per_sample(resolved_.input_shape,
                                                                        resolved_.num_classes);
          std::isfinite(flops)) {
        metrics["flops_per_sample"] = flops;
      }
    }
    metrics["samples"] = static_cast<double>(measured_samples_);
    metrics["dataset_samples"] = static_cast<double>(samples_);
    metrics["shard_first_sample"] = static_cast<double>(shard_.first);
    if (cell_.cuda_graphs) {
      metrics["cuda_graph_capture_s"] = graph_capture_s_;
      metrics["cuda_graphs_captured"] = static_cast<double>(graphs_.size());
    }
  }

  /// Note [Accuracy validation]: this rank's shard of samples [0, validation_samples)
  /// through the model as it ran and through a copy of its weights in fp32. The group's
  /// reference range comes first (SSIM needs it), together with whether every rank got its
  /// outputs, so that a rank that failed does not leave the others in a reduction.
  AccuracyReport validate(std::map<std::string, double>& metrics) override {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::pair<torch::Tensor, torch::Tensor>> outputs;  // (the cell's, reference)
    // -min and max of the reference outputs, and 1 when this rank failed: one MAX reduction.
    std::array<double, 3> extremes = {-std::numeric_limits<double>::infinity(),
                                      -std::numeric_limits<double>::infinity(), 0.0};
    std::string problem;
    try {
      outputs = validation_outputs();
      for (const auto& pair : outputs) {
        extremes[0] = std::max(extremes[0], -pair.second.min().item<double>());
        extremes[1] = std::max(extremes[1], pair.second.max().item<double>());
      }
    } catch (const std::exception& error) {
      problem = error.what();
      extremes[2] = 1.0;
    }
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, extremes.data(), static_cast<int>(extremes.size()),
                            MPI_DOUBLE, MPI_MAX, group_));
    if (!problem.empty()) throw CellError(FailurePhase::kValidation, problem);
    if (extremes[2] != 0.0) {
      throw CellError(FailurePhase::kValidation,
                      "another rank of the group could not compute its validation outputs");
    }
    const double low = -extremes[0];
    const double high = extremes[1];
    OutputSums sums;
    for (const auto& [output, reference] : outputs) {
      add_output_sums(output, reference, high - low, sums);
    }
    const OutputSums group = reduce_output_sums(sums, group_);
    if (!cell_.model.torchscript.empty() && !outputs.empty()) {  // Note [Accuracy across cells]
      std::vector<torch::Tensor> mine;
      mine.reserve(outputs.size());
      for (const auto& pair : outputs) mine.push_back(pair.first);
      const auto all = torch::cat(mine).to(torch::kCPU, torch::kFloat).contiguous();
      OutputArray handed;
      handed.shape = all.sizes().vec();
      handed.values.assign(all.data_ptr<float>(), all.data_ptr<float>() + all.numel());
      handed_ = std::move(handed);
    }
    metrics["validation_s"] = seconds_since(start);
    return finish_inference(group, low, high, cell_.tolerance);
  }

  [[nodiscard]] std::optional<OutputArray> outputs_for_baseline() const override { return handed_; }

 private:
  SampleRange batch_range(int64_t iteration) const {
    const int64_t batch = cell_.batch_size;
    if (iteration < warmup_) {
      return {samples_ + (static_cast<int64_t>(rank_) * warmup_ + iteration) * batch, batch};
    }
    const int64_t first = shard_.first + (iteration - warmup_) * batch;
    return {first, std::min(batch, shard_.first + shard_.count - first)};
  }

  /// Note [CUDA graphs for inference]: one graph per batch size this rank runs (the full
  /// batch, and the shard's last batch when it is smaller), captured before the loop.
  void capture_graphs() {
#ifdef SCALEBENCH_HAVE_CUDA
    if (!device_.is_cuda()) {
      throw InputError("cuda_graphs needs a CUDA device (the runner records it ineffective)");
    }
    const auto start = std::chrono::steady_clock::now();
    std::vector<int64_t> sizes = {cell_.batch_size};
    if (const int64_t last = shard_.count % cell_.batch_size; last != 0) sizes.push_back(last);
    for (const int64_t rows : sizes) {
      torch::Tensor example = data_->make_batch({shard_.first, rows}).inputs.to(device_);
      if (cell_.channels_last) example = to_channels_last(example);
      graphs_[rows] = capture_forward(*model_, example, cell_.precision);
    }
    synchronize_device(device_);
    graph_capture_s_ = seconds_since(start);
#else
    throw InputError("cuda_graphs needs a build with CUDA; this one has none");
#endif
  }

  CapturedForward* graph_for(int64_t rows) const {
    const auto found = graphs_.find(rows);
    return found == graphs_.end() ? nullptr : found->second.get();
  }

  /// (cell's output, reference output) per validation batch of this rank.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> validation_outputs() {
    torch::NoGradGuard no_grad;
    std::shared_ptr<models::ZooModel> reference;
    if (cell_.compile != CellSpec{}.compile) {
      // Note [Compiled twins]: the twin against the eager model it was exported from.
      reference = eager_zoo_model(cell_, tree_);
      reference->to(device_);
    } else {
      torch::manual_seed(cell_.seed);
      reference = resolved_.info->build(resolved_.input_shape, resolved_.num_classes);
      reference->to(device_);
      copy_weights(*model_, *reference);
    }
    reference->eval();
    const SampleRange shard = shard_range(cell_.validation_samples, rank_, world_);
    std::vector<std::pair<torch::Tensor, torch::Tensor>> out;
    for (int64_t first = shard.first; first < shard.first + shard.count;
         first += cell_.batch_size) {
      const int64_t rows = std::min(cell_.batch_size, shard.first + shard.count - first);
      const HostBatch host = data_->make_batch({first, rows});
      torch::Tensor output = forward_as_configured(host.inputs);
      if (const double shift = validation_output_shift(); shift != 0.0) {
        output = output + shift * output.abs().max();  // tests only
      }
      torch::Tensor expected;
      {
        const ReferenceMathScope fp32;
        expected = reference->forward(host.inputs.to(device_));
      }
      out.emplace_back(std::move(output), std::move(expected));
    }
    return out;
  }

  /// The forward of the timed loop on a host batch of at most batch_size rows: the
  /// captured graph (a smaller batch fills the first rows of the full batch's input; rows
  /// are independent in eval mode) or eager with the cell's precision and layout.
  torch::Tensor forward_as_configured(const torch::Tensor& inputs) {
    const int64_t rows = inputs.size(0);
    CapturedForward* graph = graph_for(rows);
    if (graph == nullptr) graph = graph_for(cell_.batch_size);
    if (graph != nullptr) {
      graph->input().narrow(0, 0, rows).copy_(inputs);
      return graph->replay().narrow(0, 0, rows).clone();
    }
    torch::Tensor batch = inputs.to(device_);
    if (cell_.channels_last) batch = to_channels_last(batch);
    const AutocastScope autocast(cell_.precision, device_);
    return model_->forward(batch);
  }

  // Note [Checksum after the loop]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // The output checksum runs outside every timer, but between batches it still costs the
  // loop time: for a small model (mlp, 0.75 ms batches on CPU) its few kernels made
  // loop_wall_s 8-10 % longer than the sum of the batch times. So the outputs are kept
  // (handles, no copy) while they total at most kKeptOutputBytes per rank and summed after
  // the loop; larger outputs, whose batches are long anyway, and the static buffers of
  // CUDA graphs (overwritten by the next replay) are summed between batches as before.
  static constexpr int64_t kKeptOutputBytes = 4LL << 20;

  void keep_for_checksum(const torch::Tensor& output, SampleRange range, bool static_buffer) {
    const int64_t bytes = output.numel() * static_cast<int64_t>(output.element_size());
    if (!static_buffer && kept_output_bytes_ + bytes <= kKeptOutputBytes) {
      kept_outputs_.emplace_back(output.detach(), range);
      kept_output_bytes_ += bytes;
      return;
    }
    accumulate_checksum(output, range);
  }

  /// Outside every phase: sum over samples of weight(i) * sum |output_i| (device side).
  void accumulate_checksum(const torch::Tensor& output, SampleRange range) {
    const auto per_sample = output.detach().to(torch::kDouble).abs().flatten(1).sum(1);
    checksum_.add_((per_sample * sample_weights(range.first, range.count, device_)).sum());
  }

  CellSpec cell_;
  std::string tree_;  ///< Assignment::tree: the eager reference of a twin loads its checkpoint
  torch::Device device_;
  MPI_Comm group_;
  ResolvedModel resolved_;
  int rank_ = 0;
  int world_ = 1;
  int64_t samples_ = 0;
  SampleRange shard_;
  int64_t batches_ = 0;
  int64_t warmup_ = planned_warmup_iterations(cell_);  ///< warm-up (auto: its cap) iterations
  int64_t measured_samples_ = 0;  ///< samples of the measured batches run (auto: may stop early)
  std::shared_ptr<models::ZooModel> model_;
  std::unique_ptr<BatchSource> data_;
  torch::Tensor checksum_;
  std::vector<std::pair<torch::Tensor, SampleRange>>
      kept_outputs_;  ///< Note [Checksum after the loop]
  int64_t kept_output_bytes_ = 0;
  std::map<int64_t, std::unique_ptr<CapturedForward>> graphs_;  ///< by batch rows
  double graph_capture_s_ = 0.0;
  std::optional<OutputArray> handed_;  ///< outputs_for_baseline, set by validate
  double model_init_s_ = 0.0;
  double checkpoint_load_s_ = 0.0;
};

}  // namespace

int64_t inference_samples(const CellSpec& cell) {
  return cell.samples > 0 ? cell.samples
                          : cell.batch_size * cell.world_size * planned_measured_iterations(cell);
}

std::unique_ptr<Workload> make_infer_workload(const Assignment& assignment,
                                              const torch::Device& device, MPI_Comm group) {
  return std::make_unique<InferWorkload>(assignment, device, group);
}

}  // namespace scalebench
