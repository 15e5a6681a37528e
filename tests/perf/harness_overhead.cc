// Harness overhead (issue 16, docs/performance.md): the instrumented training step of a cell
// (make_train_workload + run_timed_loop: phase timer marks, the loop's bookkeeping) against a
// bare LibTorch loop doing the same work (the same batch source, model, loss and optimizer),
// interleaved in one process (rounds alternate which goes first) so that drift of the
// machine hits both alike. Prints the median
// step of each and the ratio. A measurement, never a pass/fail test: tests/perf/run.sh runs it.
//
// Usage: harness_overhead [model] [batch] [rounds] [steps per round]   (mlp 32 20 20)
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/cell/cell_spec.h"
#include "worker/batch_source.h"
#include "worker/model_zoo.h"
#include "worker/synthetic_data.h"
#include "worker/train_workload.h"
#include "worker/workload.h"

namespace scalebench {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/// The bare loop: what TrainWorkload does in one step, without timers or the harness.
class BareTraining {
 public:
  explicit BareTraining(const CellSpec& cell) : cell_(cell), resolved_(resolve_model(cell)) {
    torch::manual_seed(cell.seed);
    model_ = resolved_.info->build(resolved_.input_shape, resolved_.num_classes);
    model_->train();
    optimizer_ = make_optimizer(cell.optimizer, model_->parameters());
    data_ = make_batch_source(cell, *resolved_.info, resolved_.input_shape,
                              cell_targets(cell, *resolved_.info, resolved_.input_shape,
                                           resolved_.num_classes, /*output_shape=*/{}),
                              "", false);
  }

  void step(int64_t iteration) {
    const HostBatch host = data_->make_batch(
        {train_first_sample(iteration, 0, 1, cell_.batch_size), cell_.batch_size});
    const auto loss = task_loss(model_->forward(host.inputs), host.targets);
    loss.backward();
    optimizer_->step();
    optimizer_->zero_grad(/*set_to_none=*/true);
  }

 private:
  CellSpec cell_;
  ResolvedModel resolved_;
  std::shared_ptr<models::ZooModel> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<BatchSource> data_;
};

int run(int argc, char** argv) {
  CellSpec cell;
  cell.model.zoo = argc > 1 ? argv[1] : "mlp";
  cell.batch_size = argc > 2 ? std::stoll(argv[2]) : 32;
  const int rounds = argc > 3 ? std::stoi(argv[3]) : 20;
  const int steps = argc > 4 ? std::stoi(argv[4]) : 20;
  cell.mode = Mode::kTrain;
  cell.device = Device::kCpu;
  cell.warmup_iterations = 0;
  cell.measured_iterations = steps;
  cell.optimizer = {"sgd", 0.01, 0.0, 0.0};
  torch::set_num_threads(1);

  std::vector<double> instrumented;
  std::vector<double> bare;
  BareTraining bare_training(cell);
  const Assignment assignment{cell, {0}, "", ""};
  auto workload = make_train_workload(assignment, torch::kCPU, MPI_COMM_SELF);
  LoopOptions options;
  options.group = MPI_COMM_SELF;
  for (int i = 0; i < 3; ++i) bare_training.step(i);  // warm-up of the bare loop
  run_timed_loop(*workload, options);                 // warm-up of the instrumented one
  const auto run_instrumented = [&] {
    // The harness times the loop from outside (loop_wall_s); per step.
    const LoopResult loop = run_timed_loop(*workload, options);
    instrumented.push_back(loop.loop_wall_s / static_cast<double>(steps));
  };
  const auto run_bare = [&] {
    const auto start = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) bare_training.step(s);  // the instrumented loop's iterations
    bare.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                   steps);
  };
  for (int round = 0; round < rounds; ++round) {  // alternate which goes first
    if (round % 2 == 0) {
      run_instrumented();
      run_bare();
    } else {
      run_bare();
      run_instrumented();
    }
  }
  const double with_harness = median(instrumented);
  const double without = median(bare);
  std::printf("harness_overhead model=%s batch=%lld rounds=%d steps/round=%d threads=1\n",
              cell.model.zoo.c_str(), static_cast<long long>(cell.batch_size), rounds, steps);
  std::printf("  instrumented step (median of rounds): %.3f ms\n", with_harness * 1e3);
  std::printf("  bare LibTorch step (median of rounds): %.3f ms\n", without * 1e3);
  std::printf("  overhead: %+.2f %% of the bare step (goal <= 0.5 %%)\n",
              100.0 * (with_harness - without) / without);
  return 0;
}

}  // namespace
}  // namespace scalebench

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int status = scalebench::run(argc, argv);
  MPI_Finalize();
  return status;
}
