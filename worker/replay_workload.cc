#include "worker/replay_workload.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/base/error.h"
#include "common/cell/bucket_assignment.h"
#include "common/cell/replay_table.h"
#include "protocol/mpi_check.h"
#include "worker/collective_backend.h"
#include "worker/gradient_reducer.h"
#include "worker/phase_timer.h"
#include "worker/train_workload.h"

namespace scalebench {
namespace {

using Clock = std::chrono::steady_clock;

ReplayTable read_table(const Assignment& assignment) {
  const std::string& relative = assignment.cell.model.replay;
  const auto path = resolve_in_tree(assignment.tree, relative);
  std::ifstream in(path);
  if (!in) {
    throw CellError(FailurePhase::kInputs, "model.replay: cannot read the layer table " +
                                               path.string() + " (relative to the branch tree)");
  }
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return parse_replay_table(text.str(), path.string());
  } catch (const InputError& error) {
    throw CellError(FailurePhase::kInputs, error.what());
  }
}

/// Sleeps until `when`; a wait in the past returns at once.
void wait_until(Clock::time_point when) { std::this_thread::sleep_until(when); }

Clock::duration scaled(double seconds, double factor) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(seconds * factor));
}

class ReplayWorkload : public Workload {
 public:
  ReplayWorkload(const Assignment& assignment, const torch::Device& device, MPI_Comm group)
      : cell_(assignment.cell), device_(device), group_(group), table_(read_table(assignment)) {
    if (!device.is_cpu()) {
      throw CellError(FailurePhase::kDevice,
                      "a replay cell runs on device: cpu (its layers are host sleeps, which a "
                      "GPU's event timers do not see); set device: cpu for this experiment");
    }
    MPI_CHECK(MPI_Comm_rank(group, &rank_));
    MPI_CHECK(MPI_Comm_size(group, &world_));
    ready_ = backward_ready_parameters(table_);
    const auto bytes = table_.parameter_bytes();
    for (const int64_t b : bytes) parameter_elements_ += b / table_.element_bytes;
    if (world_ == 1) return;  // no reducer at world 1, as in training (train_workload.h)
    assignment_ =
        compute_bucket_assignment_by_size(bytes, cell_.first_bucket_bytes, cell_.bucket_bytes);
    bucket_of_.assign(bytes.size(), 0);
    const auto dtype = table_.element_bytes == 2 ? torch::kBFloat16 : torch::kFloat32;
    for (size_t b = 0; b < assignment_.size(); ++b) {
      int64_t elements = 0;
      for (const size_t index : assignment_[b]) {
        bucket_of_[index] = b;
        elements += bytes[index] / table_.element_bytes;
      }
      buffers_.push_back(torch::zeros({elements}, torch::TensorOptions().dtype(dtype)));
    }
  }

  const std::vector<std::string>& phases() const override {
    return train_phases();  // a replayed step has the training phases
  }
  int64_t warmup_iterations() const override { return planned_warmup_iterations(cell_); }
  int64_t measured_iterations() const override { return planned_measured_iterations(cell_); }
  bool lockstep() const override { return world_ > 1; }

  void connect() override {
    if (world_ == 1) return;
    const Backend backend = resolve_backend(cell_.backend, device_);
    if (backend != Backend::kMpi) {
      throw CellError(FailurePhase::kConnect,
                      "a replay cell's buckets live on the CPU: use backend mpi or auto");
    }
    backend_ = make_mpi_backend(group_);
  }

  void run_iteration(int64_t iteration, PhaseTimer& timer) override {
    const double factor = iteration_factor(iteration);
    PhaseScope step(timer, TrainPhase::kStep);
    {
      PhaseScope phase(timer, TrainPhase::kData);
      wait_until(Clock::now() + scaled(table_.data_s, factor));
    }
    { PhaseScope phase(timer, TrainPhase::kH2d); }
    {
      PhaseScope phase(timer, TrainPhase::kForward);
      auto when = Clock::now();
      for (const auto& layer : table_.layers) {
        when += scaled(layer.forward_s, factor);
        wait_until(when);
      }
    }
    {
      PhaseScope phase(timer, TrainPhase::kBackward);
      backward(factor);
    }
    {
      PhaseScope phase(timer, TrainPhase::kCommWait);
      finish_buckets();
    }
    {
      PhaseScope phase(timer, TrainPhase::kOptimizer);
      wait_until(Clock::now() + scaled(table_.optimizer_s, factor));
    }
  }

  [[nodiscard]] std::vector<BucketTiming> last_bucket_timings() const override { return timings_; }

  void add_metrics(std::map<std::string, double>& metrics) override {
    metrics["parameter_count"] = static_cast<double>(parameter_elements_);
    metrics["replay_layers"] = static_cast<double>(table_.layers.size());
    metrics["replay_forward_s"] = table_.forward_s();
    metrics["replay_backward_s"] = table_.backward_s();
    int provided = MPI_THREAD_SINGLE;
    MPI_CHECK(MPI_Query_thread(&provided));
    metrics["mpi_comm_threads"] = backend_ && provided == MPI_THREAD_MULTIPLE ? 1.0 : 0.0;
  }

 private:
  /// Note [Replay workload]: max(0.5, 1 + jitter * z), z standard normal from (seed, rank,
  /// iteration); 1 without jitter.
  [[nodiscard]] double iteration_factor(int64_t iteration) const {
    if (table_.jitter <= 0) return 1.0;
    std::seed_seq seq{static_cast<uint64_t>(cell_.seed), static_cast<uint64_t>(rank_),
                      static_cast<uint64_t>(iteration)};
    std::mt19937_64 generator(seq);
    std::normal_distribution<double> normal(0.0, 1.0);
    return std::max(0.5, 1.0 + table_.jitter * normal(generator));
  }

  /// Layers in backward order, each a wait; the buckets whose parameters are all complete
  /// are launched in bucket order (Note [Gradient buckets]: bucket b+1 waits for b).
  void backward(double factor) {
    timings_.assign(buffers_.size(), BucketTiming{});
    works_.clear();
    std::vector<size_t> pending(assignment_.size());
    for (size_t b = 0; b < assignment_.size(); ++b) pending[b] = assignment_[b].size();
    size_t next = 0;
    auto when = Clock::now();
    for (size_t i = 0; i < ready_.size(); ++i) {
      when += scaled(table_.layers[table_.layers.size() - 1 - i].backward_s, factor);
      wait_until(when);
      if (!backend_) continue;
      for (const size_t index : ready_[i]) --pending[bucket_of_[index]];
      while (next < pending.size() && pending[next] == 0) launch(next++);
    }
    while (backend_ && next < pending.size()) launch(next++);  // every bucket was launched
  }

  void launch(size_t bucket) {
    timings_[bucket].launched = Clock::now();
    timings_[bucket].bytes = buffers_[bucket].numel() * table_.element_bytes;
    works_.push_back(backend_->allreduce_sum(buffers_[bucket]));
  }

  void finish_buckets() {
    for (size_t b = 0; b < works_.size(); ++b) {
      works_[b]->wait();
      timings_[b].completed = works_[b]->completed_at();
    }
    works_.clear();
  }

  CellSpec cell_;
  torch::Device device_;
  MPI_Comm group_;
  ReplayTable table_;
  int rank_ = 0;
  int world_ = 1;
  int64_t parameter_elements_ = 0;
  std::vector<std::vector<size_t>> ready_;       ///< per backward layer: parameters complete
  std::vector<std::vector<size_t>> assignment_;  ///< bucket -> parameter indices
  std::vector<size_t> bucket_of_;                ///< parameter -> bucket
  std::vector<torch::Tensor> buffers_;           ///< one flat gradient buffer per bucket
  std::unique_ptr<CollectiveBackend> backend_;   ///< declared before works_: outlives them
  std::vector<std::unique_ptr<CollectiveWork>> works_;
  std::vector<BucketTiming> timings_;
};

}  // namespace

std::unique_ptr<Workload> make_replay_workload(const Assignment& assignment,
                                               const torch::Device& device, MPI_Comm group) {
  return std::make_unique<ReplayWorkload>(assignment, device, group);
}

}  // namespace scalebench
