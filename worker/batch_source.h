// Where a workload's batches come from: seeded synthetic samples (default) or the rows of
// an HDF5 file's datasets (matrix `data: {hdf5: file, inputs: ..., targets: ...}`).
//
// A batch is made on the CPU (pinned when the cell runs on a GPU) inside the workloads'
// `data` / `load` phase; copying it to the device is their `h2d` phase. Sample indices are
// global positions in the cell's sample stream (see Note [Synthetic samples]); an HDF5
// source maps index i to row i mod rows, so a stream longer than the file wraps around
// (epochs).
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/cell/cell_spec.h"
#include "worker/model_zoo.h"

namespace scalebench {

/// A contiguous range of global sample indices [first, first + count).
struct SampleRange {
  int64_t first = 0;
  int64_t count = 0;
  bool operator==(const SampleRange&) const = default;
};

// Note [Targets]
// ~~~~~~~~~~~~~~
// A training cell's loss (CellSpec::loss, docs/own-model.md#losses) decides its targets:
// * cross entropy (loss auto or cross_entropy): int64 class ids [B], or voxel labels
//   [B, spatial...] for per-voxel models, in [0, num_classes). This is the rule of every
//   cell from before `loss` existed, unchanged: the same samples, losses and cell ids.
// * mse, l1, smooth_l1: float32 values [B, output...] of the model output's shape;
//   bce_with_logits: the same, in [0, 1]. Synthetic values come from the sample's own
//   generator after its input (N(0, 1), or U(0, 1) for bce), so inputs are unchanged.
// The output's per-sample shape comes from the model itself: one forward pass of a zero
// sample at setup (sample_output_shape in worker/train_workload.cc), not from a per-model
// table. TorchScript models declare no output shape, so asking the model is the one rule
// that holds for zoo and TorchScript models alike; it costs one batch-1 forward in eval
// mode without autograd, only for float losses, before the timed loop and outside every
// timer (model_init_s included).
// Inference uses no targets: an HDF5 source opens no targets dataset (the file need not
// have one). Synthetic inference batches still draw their class ids, so the load phase
// costs what it did in earlier results.

/// What a cell's targets are. See Note [Targets].
struct TargetSpec {
  enum class Kind {
    kClassIds,    ///< int64 class ids / voxel labels in [0, num_classes) (cross entropy)
    kValues,      ///< float32 values (mse, l1, smooth_l1)
    kUnitValues,  ///< float32 values in [0, 1] (bce_with_logits)
  };
  Kind kind = Kind::kClassIds;
  /// Per-sample shape: {} for a class id, the voxel grid for voxel labels, the model
  /// output's shape for values. nullopt (class ids of TorchScript models): an HDF5 file's
  /// own per-row shape, {} for synthetic samples.
  std::optional<std::vector<int64_t>> shape;
  int64_t num_classes = 0;  ///< kClassIds: labels lie in [0, num_classes)
  /// false (inference): the workload ignores targets; an HDF5 source reads none and its
  /// batches' targets are undefined.
  bool used = true;
  std::string loss = "auto";  ///< the cell's loss as written, for messages

  [[nodiscard]] bool is_float() const { return kind != Kind::kClassIds; }
};

/// The targets of `cell` (Note [Targets]) for `model` with the resolved `input_shape` and
/// `num_classes`. `output_shape` is one sample's model output shape, read for a float loss
/// only. Throws InputError for an unknown loss.
TargetSpec cell_targets(const CellSpec& cell, const ModelInfo& model,
                        const std::vector<int64_t>& input_shape, int64_t num_classes,
                        const std::vector<int64_t>& output_shape);

struct HostBatch {
  torch::Tensor inputs;  ///< [count, input_shape...] of the model's input dtype
  /// int64 [count] class ids or [count, D, H, W] voxel labels, float32 [count, output...]
  /// values (Note [Targets]), or undefined when TargetSpec::used is false (HDF5)
  torch::Tensor targets;
};

/// An uninitialised tensor [count, shape...] of `dtype`, in pinned memory when `pin_memory`.
torch::Tensor allocate_rows(int64_t count, const std::vector<int64_t>& shape,
                            torch::ScalarType dtype, bool pin_memory);

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  /// Samples `range.first` .. `range.first + range.count - 1`, freshly allocated (pinned
  /// memory comes from Torch's caching host allocator, which does not reuse a block while
  /// a non_blocking copy from it is in flight). Throws CellError(FailurePhase::kData) for data that
  /// cannot be used (a label outside [0, num_classes), a bce target outside [0, 1], an
  /// unreadable file).
  [[nodiscard]] virtual HostBatch make_batch(SampleRange range) const = 0;
  /// Per-rank metrics of the source (e.g. data_open_s, data_rows); empty for synthetic.
  [[nodiscard]] virtual std::map<std::string, double> metrics() const { return {}; }
};

/// The batch source of `cell`: synthetic, or HDF5 with `cell.data.path` resolved against
/// `tree` (Assignment::tree). `model` gives the input dtype and synthetic samples,
/// `targets` (cell_targets) what the batches' targets are. Throws
/// CellError(FailurePhase::kDataOpen) for an HDF5 file that cannot be used, naming the
/// experiment's matrix line (CellSpec::source).
std::unique_ptr<BatchSource> make_batch_source(const CellSpec& cell, const ModelInfo& model,
                                               const std::vector<int64_t>& input_shape,
                                               const TargetSpec& targets, const std::string& tree,
                                               bool pin_memory);

}  // namespace scalebench
