// The settings table: every setting of a cell, once. See Note [Settings table].
#include <type_traits>

#include "common/cell/settings.h"

namespace scalebench {
namespace {

// Enum <-> name for the accessors below.
template <typename Enum>
Enum parse_name(const std::string& text) {
  std::optional<Enum> value;
  if constexpr (std::is_same_v<Enum, Mode>) value = parse_mode(text);
  if constexpr (std::is_same_v<Enum, Precision>) value = parse_precision(text);
  if constexpr (std::is_same_v<Enum, Device>) value = parse_device(text);
  if constexpr (std::is_same_v<Enum, Backend>) value = parse_backend(text);
  return value.value_or(Enum{});  // names are checked against `choices` before a set
}

/// SettingValue of a CellSpec member of any setting type.
template <typename T>
SettingValue to_value(const T& member) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    return member;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<int64_t>(member);
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<double>(member);
  } else {
    return to_string(member);
  }
}

template <typename T>
void from_value(T& member, const SettingValue& value) {
  if constexpr (std::is_same_v<T, bool>) {
    member = std::get<bool>(value);
  } else if constexpr (std::is_integral_v<T>) {
    member = static_cast<T>(std::get<int64_t>(value));
  } else if constexpr (std::is_floating_point_v<T>) {
    member = static_cast<T>(std::get<double>(value));
  } else if constexpr (std::is_same_v<T, std::string>) {
    member = std::get<std::string>(value);
  } else {
    member = parse_name<T>(std::get<std::string>(value));
  }
}

/// Getter and setter of `CellSpec::*Member`.
template <auto Member>
SettingValue get(const CellSpec& cell) {
  return to_value(cell.*Member);
}
template <auto Member>
void set(CellSpec& cell, const SettingValue& value) {
  from_value(cell.*Member, value);
}
/// Of `CellSpec::optimizer.*Member`.
template <auto Member>
SettingValue get_optimizer(const CellSpec& cell) {
  return to_value(cell.optimizer.*Member);
}
template <auto Member>
void set_optimizer(CellSpec& cell, const SettingValue& value) {
  from_value(cell.optimizer.*Member, value);
}

constexpr double kMaxBatchSize = 1 << 20;  // above: a typo
constexpr double kMaxIterations = 1'000'000;
constexpr double kMaxBucketBytes = 68719476736.0;  // 64 GiB
constexpr double kMaxWorldSize = 1 << 20;          // the machine's limit: MatrixLimits
constexpr double kMaxSeed = 9007199254740992.0;    // 2^53: exact in every JSON reader
constexpr double kMaxTimeoutS = 7 * 24 * 3600.0;
constexpr double kMaxRepetitions = 1000;

using enum SettingType;

}  // namespace

// The rows name only the fields they set; the others keep SettingDef's member initialisers.
// GCC 12 warns about that for designated initialisers (GCC bug 96868), hence:
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
const std::vector<SettingDef>& settings_table() {
  static const std::vector<SettingDef> table{
      // --- the axes, outermost first -------------------------------------------------
      {.key = "mode",
       .list_key = "modes",
       .json_key = "mode",
       .type = kName,
       .choices = {"train", "infer"},
       .doc = "train (DDP training step) or infer (sharded inference)",
       .axis = true,
       .get = get<&CellSpec::mode>,
       .set = set<&CellSpec::mode>},
      {.key = "batch_size",
       .list_key = "batch_sizes",
       .json_key = "batch_size",
       .type = kInt,
       .minimum = 1,
       .maximum = kMaxBatchSize,
       .keyword = "auto",
       .doc = "per-rank batch size; auto searches the largest that fits and runs the "
              "recommended one (docs/batch-size.md)",
       .axis = true,
       .get = get<&CellSpec::batch_size>,
       .set = set<&CellSpec::batch_size>},
      {.key = "world_size",
       .list_key = "world_sizes",
       .json_key = "world_size",
       .type = kInt,
       .minimum = 1,
       .maximum = kMaxWorldSize,
       .doc = "worker ranks of the cell's group (GPUs, or CPU slots)",
       .axis = true,
       .get = get<&CellSpec::world_size>,
       .set = set<&CellSpec::world_size>},
      {.key = "precision",
       .list_key = "precisions",
       .json_key = "precision",
       .type = kName,
       .choices = {"fp32", "fp16", "bf16"},
       .doc = "fp32, or fp16 / bf16 autocast",
       .axis = true,
       .get = get<&CellSpec::precision>,
       .set = set<&CellSpec::precision>},
      // --- the loop ---------------------------------------------------------------------
      {.key = "warmup",
       .json_key = "warmup_iterations",
       .type = kInt,
       .minimum = 0,
       .maximum = kMaxIterations,
       .keyword = "auto",
       .keyword_value = kWarmupAuto,
       .doc = "warm-up iterations (run, stored, flagged); auto: until the step stops getting "
              "faster (docs/measurement.md)",
       .get = get<&CellSpec::warmup_iterations>,
       .set = set<&CellSpec::warmup_iterations>},
      {.key = "iterations",
       .json_key = "measured_iterations",
       .type = kInt,
       .minimum = 1,
       .maximum = kMaxIterations,
       .keyword = "auto",
       .keyword_value = kIterationsAuto,
       .doc = "measured iterations (inference: batches per rank); auto: until the median's "
              "95 % interval is within ci_width (docs/measurement.md)",
       .get = get<&CellSpec::measured_iterations>,
       .set = set<&CellSpec::measured_iterations>},
      {.key = "ci_width",
       .json_key = "ci_width",
       .type = kNumber,
       .minimum = 0,
       .maximum = 1,
       .exclusive_minimum = true,
       .doc = "iterations auto: target half-width of the median's 95 % interval, relative to "
              "the median (0.02 = +-2 %)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::ci_width>,
       .set = set<&CellSpec::ci_width>},
      {.key = "max_seconds",
       .json_key = "max_seconds",
       .type = kNumber,
       .unit = "s",
       .minimum = 0,
       .maximum = kMaxTimeoutS,
       .exclusive_minimum = true,
       .doc = "iterations auto: budget of the measured loop (warm-up auto: a quarter of it)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::max_seconds>,
       .set = set<&CellSpec::max_seconds>},
      {.key = "max_iterations",
       .json_key = "max_iterations",
       .type = kInt,
       .minimum = 10,
       .maximum = 100000,
       .doc = "iterations auto: cap of measured iterations (inference: batches per rank)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::max_iterations>,
       .set = set<&CellSpec::max_iterations>},
      {.key = "samples",
       .json_key = "samples",
       .type = kInt,
       .minimum = 0,
       .maximum = 1e15,
       .doc = "inference dataset size, all ranks together; 0 = batch x world x iterations",
       .get = get<&CellSpec::samples>,
       .set = set<&CellSpec::samples>},
      {.key = "seed",
       .json_key = "seed",
       .type = kInt,
       .minimum = 0,
       .maximum = kMaxSeed,
       .doc = "seed of the weights and the synthetic data",
       .get = get<&CellSpec::seed>,
       .set = set<&CellSpec::seed>},
      {.key = "timeout_s",
       .json_key = "timeout_s",
       .type = kNumber,
       .unit = "s",
       .minimum = 0,
       .maximum = kMaxTimeoutS,
       .exclusive_minimum = true,
       .doc = "time limit of the cell; past it the cell is recorded as timeout",
       .get = get<&CellSpec::timeout_s>,
       .set = set<&CellSpec::timeout_s>},
      // --- where and how it runs ------------------------------------------------------
      {.key = "device",
       .json_key = "device",
       .type = kName,
       .choices = {"auto", "cpu", "cuda"},
       .doc = "auto (a GPU when there is one), cpu or cuda",
       .get = get<&CellSpec::device>,
       .set = set<&CellSpec::device>},
      {.key = "backend",
       .json_key = "backend",
       .type = kName,
       .choices = {"auto", "mpi", "nccl"},
       .doc = "gradient allreduce: auto (nccl on GPU, mpi on CPU), mpi or nccl",
       .get = get<&CellSpec::backend>,
       .set = set<&CellSpec::backend>},
      {.key = "bucket_bytes",
       .json_key = "bucket_bytes",
       .type = kInt,
       .unit = "bytes",
       .minimum = 1,
       .maximum = kMaxBucketBytes,
       .doc = "DDP gradient bucket size",
       .get = get<&CellSpec::bucket_bytes>,
       .set = set<&CellSpec::bucket_bytes>},
      {.key = "first_bucket_bytes",
       .json_key = "first_bucket_bytes",
       .type = kInt,
       .unit = "bytes",
       .minimum = 1,
       .maximum = kMaxBucketBytes,
       .doc = "DDP first (smallest) bucket size",
       .get = get<&CellSpec::first_bucket_bytes>,
       .set = set<&CellSpec::first_bucket_bytes>},
      {.key = "channels_last",
       .json_key = "channels_last",
       .type = kBool,
       .doc = "channels-last memory format for 4-D/5-D inputs and weights",
       .get = get<&CellSpec::channels_last>,
       .set = set<&CellSpec::channels_last>},
      {.key = "tf32",
       .json_key = "tf32",
       .type = kBool,
       .doc = "allow TF32 matmul and convolution on GPU",
       .get = get<&CellSpec::tf32>,
       .set = set<&CellSpec::tf32>},
      {.key = "cudnn_benchmark",
       .json_key = "cudnn_benchmark",
       .type = kBool,
       .doc = "cuDNN autotuning of convolution algorithms (GPU; no effect on CPU)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::cudnn_benchmark>,
       .set = set<&CellSpec::cudnn_benchmark>},
      {.key = "deterministic",
       .json_key = "deterministic",
       .type = kBool,
       .doc = "deterministic algorithms only (torch's use_deterministic_algorithms and cuDNN "
              "deterministic); an op without a deterministic kernel fails the cell",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::deterministic>,
       .set = set<&CellSpec::deterministic>},
      {.key = "pinned_memory",
       .json_key = "pinned_memory",
       .type = kBool,
       .doc = "page-locked host batches, copied to the GPU asynchronously (GPU; no effect on "
              "CPU)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::pinned_memory>,
       .set = set<&CellSpec::pinned_memory>},
      {.key = "cuda_graphs",
       .json_key = "cuda_graphs",
       .type = kBool,
       .doc = "inference: the forward pass captured in a CUDA graph and replayed per batch "
              "(GPU; no effect on CPU; refused for training)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::cuda_graphs>,
       .set = set<&CellSpec::cuda_graphs>},
      {.key = "cpu_threads",
       .json_key = "cpu_threads",
       .type = kInt,
       .minimum = 0,
       .maximum = 4096,
       .doc = "intra-op CPU threads of each worker; 0 = auto: the node's cores / its workers",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::cpu_threads>,
       .set = set<&CellSpec::cpu_threads>},
      // --- accuracy validation ---------------------------------------------------------
      {.key = "validate",
       .json_key = "validate",
       .type = kBool,
       .doc = "after the timed loop, compare the cell's outputs (inference) or losses and "
              "parameters (training) with an fp32 reference without optimizations "
              "(docs/accuracy.md)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::validate>,
       .set = set<&CellSpec::validate>},
      {.key = "tolerance",
       .json_key = "tolerance",
       .type = kNumber,
       .minimum = 0,
       .maximum = 1,
       .exclusive_minimum = true,
       .doc = "validation: largest relative error that passes (mean error / reference "
              "range, 1 - cosine, 1 - SSIM, loss and parameter deviation)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::tolerance>,
       .set = set<&CellSpec::tolerance>},
      {.key = "validation_samples",
       .json_key = "validation_samples",
       .type = kInt,
       .minimum = 1,
       .maximum = 1 << 20,
       .doc = "validation of inference cells: samples compared (all ranks together)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::validation_samples>,
       .set = set<&CellSpec::validation_samples>},
      // --- batch size auto (Note [Batch search]) ------------------------------------------
      {.key = "min_batch",
       .json_key = "min_batch",
       .type = kInt,
       .minimum = 1,
       .maximum = kMaxBatchSize,
       .doc = "batch_size auto: the first batch probed",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::min_batch>,
       .set = set<&CellSpec::min_batch>},
      {.key = "max_batch",
       .json_key = "max_batch",
       .type = kInt,
       .minimum = 1,
       .maximum = kMaxBatchSize,
       .doc = "batch_size auto: the largest batch probed",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::max_batch>,
       .set = set<&CellSpec::max_batch>},
      {.key = "memory_limit_mb",
       .json_key = "memory_limit_mb",
       .type = kNumber,
       .unit = "MiB",
       .minimum = 0,
       .maximum = 1 << 24,
       .doc = "per-worker memory budget (GPU: peak allocated; CPU: peak RSS); a cell above it "
              "is recorded oom; 0 = none (auto then uses the GPU's memory, or the node's "
              "available memory shared by its workers)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::memory_limit_mb>,
       .set = set<&CellSpec::memory_limit_mb>},
      {.key = "safety_margin",
       .json_key = "safety_margin",
       .type = kNumber,
       .minimum = 0,
       .maximum = 1,
       .exclusive_maximum = true,
       .doc = "batch_size auto: share of the memory budget the recommended batch leaves free",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::safety_margin>,
       .set = set<&CellSpec::safety_margin>},
      {.key = "latency_slo_ms",
       .json_key = "latency_slo_ms",
       .type = kNumber,
       .unit = "ms",
       .minimum = 0,
       .maximum = kMaxTimeoutS * 1000,
       .doc = "batch_size auto: p99 step (train) or batch (inference) time the recommended "
              "batch must meet; 0 = none",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::latency_slo_ms>,
       .set = set<&CellSpec::latency_slo_ms>},
      {.key = "probe_iterations",
       .json_key = "probe_iterations",
       .type = kInt,
       .minimum = 1,
       .maximum = kMaxIterations,
       .doc = "batch_size auto: measured iterations per probe (after one warm-up)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::probe_iterations>,
       .set = set<&CellSpec::probe_iterations>},
      {.key = "batch_precision",
       .json_key = "batch_precision",
       .type = kNumber,
       .minimum = 0,
       .maximum = 0.5,
       .doc = "batch_size auto: the search stops bisecting once the smallest batch that did not "
              "fit is within this fraction of the largest that did (0: adjacent batches)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::batch_precision>,
       .set = set<&CellSpec::batch_precision>},
      // --- repetitions (Note [Repetitions] in common/cell/repetition_stats.h) -----------------
      {.key = "repetitions",
       .json_key = "repetitions",
       .type = kInt,
       .minimum = 1,
       .maximum = kMaxRepetitions,
       .keyword = "auto",
       .keyword_value = kRepetitionsAuto,
       .doc = "runs of each cell; above 1 the results give the between-repetition median and "
              "its 95 % bootstrap interval (docs/repetitions.md); auto: interleaved rounds "
              "until every comparison of the cell is decided (at most max_repetitions)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::repetitions>,
       .set = set<&CellSpec::repetitions>},
      {.key = "max_repetitions",
       .json_key = "max_repetitions",
       .type = kInt,
       .minimum = 3,
       .maximum = kMaxRepetitions,
       .doc = "repetitions auto: the most runs of a cell (the first three always run)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::max_repetitions>,
       .set = set<&CellSpec::max_repetitions>},
      {.key = "repetitions_budget_s",
       .json_key = "repetitions_budget_s",
       .type = kNumber,
       .unit = "s",
       .minimum = 0,
       .maximum = kMaxTimeoutS * 1000,
       .doc = "repetitions auto: no round after the third starts once the run has taken this "
              "long; 0 = no limit",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::repetitions_budget_s>,
       .set = set<&CellSpec::repetitions_budget_s>},
      {.key = "interleave",
       .json_key = "interleave",
       .type = kBool,
       .doc = "repetitions > 1: run repetition k of every interleaved cell in round k, in a "
              "seeded random order within the round (false: one after the other)",
       .id = IdRule::kNever,
       .get = get<&CellSpec::interleave>,
       .set = set<&CellSpec::interleave>},
      // --- the optimizer (training) -----------------------------------------------------
      {.key = "loss",
       .json_key = "loss",
       .type = kName,
       .choices = {"auto", "cross_entropy", "mse", "l1", "smooth_l1", "bce_with_logits"},
       .doc = "training loss; auto: cross entropy on class targets (docs/own-model.md#losses)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::loss>,
       .set = set<&CellSpec::loss>},
      {.key = "compile",
       .json_key = "compile",
       .type = kName,
       .choices = {"eager", "torchscript", "aoti"},
       .doc = "inference of a zoo model: eager (LibTorch modules), or its TorchScript or "
              "AOTInductor twin exported at prepare time from the same weights "
              "(docs/optimizations.md#compilation)",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::compile>,
       .set = set<&CellSpec::compile>},
      {.key = "profile_steps",
       .json_key = "profile_steps",
       .type = kInt,
       .minimum = 0,
       .maximum = 1000,
       .doc = "steps run under the operator profiler after the measured iterations, never part "
              "of the measured figures; their operator table is stored (docs/profiles.md); 0 = "
              "none",
       .id = IdRule::kUnlessDefault,
       .get = get<&CellSpec::profile_steps>,
       .set = set<&CellSpec::profile_steps>},
      {.key = "optimizer.name",
       .json_key = "optimizer.name",
       .type = kName,
       .choices = {"sgd", "adam", "adamw"},
       .doc = "training optimizer: sgd, adam or adamw",
       .get = get_optimizer<&OptimizerSpec::name>,
       .set = set_optimizer<&OptimizerSpec::name>},
      {.key = "optimizer.lr",
       .json_key = "optimizer.lr",
       .type = kNumber,
       .minimum = 0,
       .maximum = 10,
       .exclusive_minimum = true,
       .doc = "learning rate",
       .get = get_optimizer<&OptimizerSpec::lr>,
       .set = set_optimizer<&OptimizerSpec::lr>},
      {.key = "optimizer.momentum",
       .json_key = "optimizer.momentum",
       .type = kNumber,
       .minimum = 0,
       .maximum = 1,
       .exclusive_maximum = true,
       .doc = "SGD momentum",
       .get = get_optimizer<&OptimizerSpec::momentum>,
       .set = set_optimizer<&OptimizerSpec::momentum>},
      {.key = "optimizer.weight_decay",
       .json_key = "optimizer.weight_decay",
       .type = kNumber,
       .minimum = 0,
       .maximum = 1e6,
       .doc = "weight decay",
       .get = get_optimizer<&OptimizerSpec::weight_decay>,
       .set = set_optimizer<&OptimizerSpec::weight_decay>},
      {.key = "optimizer.fused",
       .json_key = "optimizer.fused",
       .type = kBool,
       .doc = "a fused optimizer step where the build offers one (LibTorch's C++ optimizers "
              "do not: recorded as ineffective)",
       .id = IdRule::kUnlessDefault,
       .get = get_optimizer<&OptimizerSpec::fused>,
       .set = set_optimizer<&OptimizerSpec::fused>},
  };
  return table;
}
#pragma GCC diagnostic pop

}  // namespace scalebench
