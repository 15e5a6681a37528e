// The one timing loop, and the interface the benchmarks (training, inference) fill in.
//
// A Workload is made (model, data, optimizer: local work only), then `connect()`ed (the
// collective setup), then the harness `run_timed_loop` runs its warm-up and measured
// iterations under one PhaseTimer, checks the cooperative deadline between iterations,
// times the measured loop from outside, and resolves the timer once at the end. See
// Note [Cell timing protocol] (worker/phase_timer.h) and Note [Cooperative timeout].
#pragma once

#include <mpi.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/cell/accuracy.h"
#include "common/cell/adaptive_stop.h"
#include "common/cell/cell_spec.h"
#include "common/cell/output_comparison.h"
#include "worker/gpu_power.h"
#include "worker/gradient_reducer.h"
#include "worker/model_zoo.h"
#include "worker/phase_timer.h"

namespace scalebench {

class Workload {
 public:
  virtual ~Workload() = default;
  /// Phase names (columns); the last one spans the whole iteration.
  [[nodiscard]] virtual const std::vector<std::string>& phases() const = 0;
  [[nodiscard]] virtual int64_t warmup_iterations() const = 0;
  /// Measured iterations of this rank (inference: its number of batches; may be 0).
  [[nodiscard]] virtual int64_t measured_iterations() const = 0;
  /// True when every rank must run the same number of iterations (collectives inside an
  /// iteration): the harness then agrees on stopping across the group.
  [[nodiscard]] virtual bool lockstep() const = 0;
  /// Collective setup on the group (communicators, parameter broadcast). Called on every
  /// rank once all ranks constructed their workload.
  virtual void connect() {}
  /// Runs iteration `iteration` (warm-up ones first, counted from 0), timing its phases in
  /// the timer's current row.
  virtual void run_iteration(int64_t iteration, PhaseTimer& timer) = 0;
  /// Per-rank metrics after the loop (device synchronised), e.g. final_loss.
  virtual void add_metrics(std::map<std::string, double>& metrics) = 0;
  /// Called from another thread (Note [Collective watchdog] in worker/torch_cell_runner.cc):
  /// aborts the cell's collectives so that a rank blocked in one returns with an error.
  /// False when there are none or they cannot be cancelled (MPI).
  virtual bool abort_collectives() { return false; }
  /// The gradient buckets' allreduces of the iteration just run (training with a reducer);
  /// empty for workloads without buckets.
  [[nodiscard]] virtual std::vector<BucketTiming> last_bucket_timings() const { return {}; }
  /// Note [Accuracy validation] (common/cell/accuracy.h): compares the cell with its fp32
  /// reference, after the loop and outside every timer; collective over the group (every
  /// rank calls it, and gets the same report). `validation_s` goes into `metrics`. Throws
  /// CellError(kValidation) when the comparison cannot be made.
  virtual AccuracyReport validate(std::map<std::string, double>& metrics) {
    (void)metrics;
    throw CellError(FailurePhase::kValidation, "this workload has no accuracy validation");
  }
  /// Note [Accuracy across cells] (common/cell/output_comparison.h): after validate, the
  /// cell's own outputs of this rank's validation samples when they can be compared with
  /// another cell's (a TorchScript model: the user's, which a branch may change); else none.
  [[nodiscard]] virtual std::optional<OutputArray> outputs_for_baseline() const {
    return std::nullopt;
  }
};

struct LoopOptions {
  torch::Device device = torch::kCPU;
  MPI_Comm group = MPI_COMM_NULL;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// The GPU's energy counter and clocks (Note [GPU energy]); null: not measured.
  const GpuPower* power = nullptr;
  /// Called after every iteration with the stage ("warmup" or "measured"), the iterations
  /// of that stage done and its total (Note [Cell progress]); may be empty. Must be cheap:
  /// it runs between timed iterations.
  std::function<void(const char* stage, int64_t done, int64_t total)> on_iteration;
  /// Set: `iterations: auto` (Note [Iterations auto]); the workload's measured_iterations()
  /// is then the cap. Unset: the workload's count exactly.
  std::optional<AdaptiveOptions> adaptive;
  /// `warmup: auto` (Note [Warm-up auto]); the workload's warmup_iterations() is the cap,
  /// and a quarter of `max_seconds` (the cell's) its time.
  bool warmup_auto = false;
  double max_seconds = 60.0;
};

struct LoopResult {
  std::vector<double> timings_s;  ///< row-major [iterations run][phases]
  /// Note [Shared cell clock]: begin of each phase since the group's origin, same shape.
  std::vector<double> phase_starts_s;
  /// System clock (seconds since the Unix epoch) at the origin.
  double origin_epoch_s = 0.0;
  /// Note [Shared cell clock]: per row, per gradient bucket, [launched, completed] seconds
  /// since the origin on the host's steady clock (completed NaN where the backend does not
  /// know it); row-major [rows][bucket_bytes.size()][2]. Empty without buckets.
  std::vector<double> bucket_times_s;
  std::vector<int64_t> bucket_bytes;  ///< size of each bucket
  int64_t iterations_run = 0;         ///< warm-up + measured iterations completed
  int64_t warmup_run = 0;             ///< warm-up iterations completed
  bool timed_out = false;             ///< stopped early by the deadline
  double loop_wall_s = 0.0;        ///< steady_clock around the measured iterations (+ final sync)
  double first_iteration_s = 0.0;  ///< steady_clock of iteration 0 including a device sync
  /// loop_power_metrics of the measured loop (empty without LoopOptions::power).
  std::map<std::string, double> power_metrics;
  StopReason stop_reason = StopReason::kFixed;  ///< Note [Iterations auto]
  std::string warmup_reason;                    ///< Note [Warm-up auto]; "" for fixed
  /// auto: the group's interval of the median iteration time the rule stopped on.
  MedianInterval group_interval;
};

// Note [Cooperative timeout]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// The deadline is checked between iterations only; an iteration that never returns (a
// hung collective) is not interrupted here: the orchestrator's cell timeout covers it.
// Independent ranks (inference) stop on their own. Lockstep ranks (training) must stop
// at the same iteration or the others would wait forever in the next gradient allreduce:
// after each iteration every rank starts an MPI_Iallreduce(MAX) of "my deadline passed"
// on the group and completes it after the next iteration, so the vote costs no stall and
// every rank acts on the same result one iteration later. A cell with `iterations: auto`
// or `warmup: auto` votes so even for inference: its ranks meet at every block's decision
// (Note [Iterations auto]), so they must stop together.

/// Runs warm-up then measured iterations of `workload` (worker/timed_loop.cc: one loop of
/// blocks for each, sized by the rules of Note [Measured blocks]). The group meets in an
/// MPI_Barrier before the first iteration (the origin of Note [Shared cell clock]) and again
/// between warm-up and measured iterations so measured loops start together. Exceptions from the
/// workload propagate (the cell runner records them).
LoopResult run_timed_loop(Workload& workload, const LoopOptions& options);

/// Seconds of the steady clock from `start` to now (start-up and wall-clock figures).
double seconds_since(std::chrono::steady_clock::time_point start);

// ---- helpers shared by the workloads ----------------------------------------------------

/// The model of one cell resolved: defaults applied, shape checked.
struct ResolvedModel {
  /// The zoo entry (shared, never freed), or the entry of a TorchScript cell
  /// (scripted_model_info), which owns the module's bytes.
  std::shared_ptr<const ModelInfo> info;
  std::vector<int64_t> input_shape;
  int64_t num_classes = 0;
};
/// The model of `cell`. `artifact` is the TorchScript module's bytes for a TorchScript
/// cell (Assignment::artifact) and ignored otherwise. Throws InputError for unknown names
/// or unusable shapes, CellError(FailurePhase::kModelInit) for a TorchScript cell without bytes.
ResolvedModel resolve_model(const CellSpec& cell, std::string artifact = {});

/// Throws CellError(FailurePhase::kModelInit) when `precision` cannot run on `device` (fp16 on
/// CPU).
void check_precision(Precision precision, const torch::Device& device);

/// Enables autocast for `device` with the cell's reduced precision while in scope; does
/// nothing for fp32. Restores the previous state on destruction.
class AutocastScope {
 public:
  AutocastScope(Precision precision, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
  c10::DeviceType device_type_ = c10::DeviceType::CPU;
};

/// Channels-last layout for 4-D (ChannelsLast) and 5-D (ChannelsLast3d) tensors; others
/// unchanged.
torch::Tensor to_channels_last(const torch::Tensor& tensor);
/// Converts every 4-D / 5-D parameter and buffer of `module` in place.
void module_to_channels_last(torch::nn::Module& module);

/// Sets cuBLAS and cuDNN TF32 use (process-wide; set by every cell).
void set_tf32(bool allow);

/// Order- and sign-sensitive checksum of parameters: sum over parameters p (model order)
/// and elements k of (|w| + w / 2) * (1 + ((p * 31 + k) mod 13) / 13), in double. Equal
/// replicas give equal checksums; a permuted or sign-flipped weight changes it.
double parameter_checksum(torch::nn::Module& module);

}  // namespace scalebench
