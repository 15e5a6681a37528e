// The resolved cell: one fully specified benchmark, plain data.
//
// A CellSpec is what the matrix expansion produces and what a worker runs. It is
// immutable once `cell_id` is set: `cell_id` is a stable hash of the canonical JSON of
// every field that changes the measurement (see Note [Cell identity]). Units are in the
// field names. Defaults here are the defaults a matrix file gets when it is silent.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/cell/program.h"

namespace scalebench {

enum class Mode { kTrain, kInfer };
enum class Precision { kFp32, kFp16, kBf16 };
enum class Device { kAuto, kCpu, kCuda };
enum class Backend { kAuto, kMpi, kNccl };

std::string to_string(Mode mode);
std::string to_string(Precision precision);
std::string to_string(Device device);
std::string to_string(Backend backend);
/// Parsers return std::nullopt for an unknown name (callers turn that into InputError).
std::optional<Mode> parse_mode(const std::string& text);
std::optional<Precision> parse_precision(const std::string& text);
std::optional<Device> parse_device(const std::string& text);
std::optional<Backend> parse_backend(const std::string& text);

/// Optimizer of a training cell. `name` is one of sgd, adam, adamw.
struct OptimizerSpec {
  std::string name = "sgd";
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool fused = false;  ///< a fused (single-kernel) step, where the build offers one
  bool operator==(const OptimizerSpec&) const = default;
};

/// Where batches come from. kind "synthetic" (seeded random inputs/targets made on the
/// host) or "hdf5" (datasets `inputs`/`targets` of `path`, relative to the branch tree).
struct DataSpec {
  std::string kind = "synthetic";
  std::string path;
  std::string inputs;
  std::string targets;
  bool operator==(const DataSpec&) const = default;
};

/// The model: a zoo name ("mlp", "resnet18", ...), a TorchScript file, an AOTInductor
/// package or a replay layer table in the branch tree (exactly one is set).
struct ModelSpec {
  std::string zoo;          ///< zoo name; empty when a file is set
  std::string torchscript;  ///< path relative to the branch tree; empty for zoo models
  /// AOTInductor package (.pt2 of torch._inductor.aoti_compile_and_package), relative to the
  /// branch tree; inference only (docs/own-model.md).
  std::string aoti;
  /// A layer table (JSON) whose times are replayed as waits while its gradients are reduced
  /// for real, relative to the branch tree; training only (Note [Replay workload] in
  /// common/cell/replay_table.h, docs/replay.md).
  std::string replay;
  bool operator==(const ModelSpec&) const = default;
};

/// `batch_size: auto` in a matrix: the cell searches its batch (Note [Batch search]).
inline constexpr int64_t kBatchAuto = 0;
/// `iterations: auto`: the cell measures until its interval is tight (Note [Iterations auto]
/// in common/cell/adaptive_stop.h).
inline constexpr int kIterationsAuto = 0;
/// `repetitions: auto` as the setting's value (expanded into max_repetitions runs).
inline constexpr int64_t kRepetitionsAuto = 0;
/// `warmup: auto`: warm-up until the cell stops getting faster (Note [Warm-up auto]).
inline constexpr int kWarmupAuto = -1;

struct CellSpec {
  // --- what is benchmarked -------------------------------------------------------------
  std::string branch;      ///< ref as written in the matrix; "" when the matrix has no repo
  std::string commit;      ///< resolved commit hash; "" when no repo
  std::string experiment;  ///< experiment name
  ModelSpec model;
  ProgramSpec program;  ///< set: a program cell (docs/programs.md); `model` is then empty
  std::vector<int64_t>
      input_shape;          ///< per-sample shape, e.g. {3, 224, 224}; empty = model default
  int64_t num_classes = 0;  ///< 0 = model default
  Mode mode = Mode::kTrain;
  OptimizerSpec optimizer;
  DataSpec data;
  std::string checkpoint;  ///< inference: checkpoint path in the branch tree, "" = none

  // --- how it is run ---------------------------------------------------------------------
  int64_t batch_size = 1;  ///< per rank; kBatchAuto: searched by the worker
  int world_size = 1;      ///< number of worker ranks in the cell's group
  Precision precision = Precision::kFp32;
  bool channels_last = false;
  bool tf32 = false;
  bool cudnn_benchmark = false;  ///< cuDNN autotuning of convolution algorithms (GPU only)
  bool deterministic = false;    ///< deterministic algorithms (and cuDNN) only
  bool pinned_memory = false;    ///< page-locked host batches for the copy to a GPU
  bool cuda_graphs = false;      ///< inference forward captured once, replayed per batch (GPU)
  int64_t cpu_threads = 0;       ///< intra-op threads per worker; 0 = auto (cores / workers)
  Device device = Device::kAuto;
  Backend backend = Backend::kAuto;
  int64_t bucket_bytes = 25LL * 1024 * 1024;       ///< DDP gradient bucket size
  int64_t first_bucket_bytes = 1LL * 1024 * 1024;  ///< DDP first (smallest) bucket
  int warmup_iterations = 2;     ///< kWarmupAuto: chosen by the cell (Note [Warm-up auto])
  int measured_iterations = 10;  ///< kIterationsAuto: chosen by the cell
  int64_t samples = 0;  ///< inference dataset size (all ranks together); 0 = batch*world*iterations
  uint64_t seed = 0;
  double timeout_s = 600.0;

  // --- iterations auto (Note [Iterations auto] in common/cell/adaptive_stop.h) -------------
  double ci_width = 0.02;         ///< target half-width of the median's 95 % interval, relative
  double max_seconds = 60.0;      ///< budget of the measured loop (and a quarter for warm-up)
  int64_t max_iterations = 2000;  ///< cap of measured iterations

  /// Training loss (docs/own-model.md#losses): "auto" (cross entropy on class targets, the
  /// zoo's rule), cross_entropy, mse, l1, smooth_l1, bce_with_logits.
  std::string loss = "auto";

  /// How an inference cell runs its zoo model (docs/optimizations.md#compilation): "eager"
  /// (the LibTorch modules), or "torchscript" / "aoti": its twin exported by rank 0 at
  /// prepare time from the same weights (Note [Compiled twins] in
  /// orchestrator/compiled_twins.h).
  std::string compile = "eager";

  /// Steps run under the operator profiler after the measured iterations, never timed (Note
  /// [Operator profiles] in common/cell/op_profile.h); 0 = no profile.
  int64_t profile_steps = 0;

  // --- accuracy validation (Note [Accuracy validation] in common/cell/accuracy.h) -------------
  bool validate = false;            ///< compare against an fp32 reference after the loop
  double tolerance = 0.01;          ///< relative (docs/accuracy.md)
  int64_t validation_samples = 64;  ///< inference: samples compared, all ranks together

  // --- batch size auto (Note [Batch search] in common/cell/batch_search.h) -------------------
  // batch_size == kBatchAuto: the worker searches the batch; these bound and steer it.
  // memory_limit_mb applies to every cell: a peak above it records the cell `oom`.
  int64_t min_batch = 1;
  int64_t max_batch = 65536;
  double memory_limit_mb = 0;  ///< per-worker memory budget, MiB; 0 = none (auto: see docs)
  double safety_margin = 0.1;  ///< auto: share of the budget the recommended batch leaves free
  double latency_slo_ms = 0;   ///< auto: p99 step/batch time the recommended batch meets; 0 = none
  int64_t probe_iterations = 5;  ///< auto: measured iterations per probe
  /// auto: the bisection ends when the smallest batch that did not fit is within this
  /// fraction of the largest that did (0: adjacent batches); Note [Batch search].
  double batch_precision = 0.02;

  // --- repetitions (Note [Repetitions] in common/cell/repetition_stats.h) ----------------------
  int64_t repetitions = 1;  ///< runs of the cell; each is its own cell of the results file
  bool interleave = true;   ///< repetitions > 1: run in a seeded shuffle with the other cells
  /// repetitions auto (Note [Adaptive repetitions] in orchestrator/adaptive_rounds.h): the most
  /// runs, and the seconds of the run after which no further round starts (0: no limit).
  int64_t max_repetitions = 20;
  double repetitions_budget_s = 0;
  /// Set by the expansion for `repetitions: auto`, which then makes max_repetitions cells
  /// (repetitions = max_repetitions); rounds after the third run only while a comparison of the
  /// series is undecided. In the identity only when true.
  bool adaptive_repetitions = false;
  /// Which run of the cell this is, 0..repetitions-1. Set by the expansion, not a setting;
  /// in the identity only when > 0, so repetition 0's id is the id of the series.
  int64_t repetition = 0;

  // --- bookkeeping (not part of the identity) -------------------------------------------
  std::string source;   ///< "file:line" where the cell's experiment was declared
  std::string cell_id;  ///< set by `finalize_cell_id`
  /// Settings other than the four classic axes (mode, batch, world, precision) that take
  /// more than one value among the cells of this experiment: cell_label shows them
  /// ("channels_last=true"). Note [Every setting is an axis] in matrix/expand.cc.
  std::vector<std::string> label_settings;

  bool operator==(const CellSpec&) const = default;
};

// Note [Cell identity]
// ~~~~~~~~~~~~~~~~~~~~
// cell_id = first 16 hex digits of FNV-1a-64 over `canonical_json(spec).dump()`, where
// canonical_json holds every field except `source`, `cell_id` and `label_settings` with keys
// sorted
// (nlohmann::json objects are ordered maps). The same spec gives the same id on every
// machine and in every run, so `--resume` matches cells by id, and a changed field
// (batch, seed, commit, ...) gives a new id. Adding a field to CellSpec changes ids
// only if the field is serialised; bump the results layout version when it is.

/// Every identity field of `spec` as JSON (no `source`, no `cell_id`).
nlohmann::json canonical_json(const CellSpec& spec);
/// 16 lowercase hex digits; see Note [Cell identity].
std::string compute_cell_id(const CellSpec& spec);
/// Sets spec.cell_id = compute_cell_id(spec) and returns spec.
CellSpec finalize_cell_id(CellSpec spec);

/// Full JSON (identity fields + source + cell_id) and back. `from_json` throws
/// InputError naming the missing or ill-typed field.
nlohmann::json to_json(const CellSpec& spec);
CellSpec cell_spec_from_json(const nlohmann::json& json);

/// The id of `spec`'s series: the cell id of its repetition 0 (== spec.cell_id when
/// repetitions is 1).
std::string series_id(const CellSpec& spec);

/// "auto" for kBatchAuto, else the number.
std::string batch_text(int64_t batch_size);

/// True for `iterations: auto` / `warmup: auto`.
inline bool iterations_auto(const CellSpec& cell) {
  return cell.measured_iterations == kIterationsAuto;
}
inline bool warmup_auto(const CellSpec& cell) { return cell.warmup_iterations == kWarmupAuto; }
/// The iterations a worker plans room for: the fixed counts, or the caps of the auto rules
/// (max_iterations; WarmupAuto::kWarmupCap).
int64_t planned_warmup_iterations(const CellSpec& cell);
int64_t planned_measured_iterations(const CellSpec& cell);

/// Short label for logs and tables: "main/mlp-train/train/b16/w2/fp32", then
/// "/<key>=<value>" for each of `label_settings`, then "/rep<k>" when repetitions > 1.
std::string cell_label(const CellSpec& spec);

/// FNV-1a 64-bit hash of bytes (stable, used for ids and checksums of text).
uint64_t fnv1a64(const std::string& bytes);

}  // namespace scalebench
