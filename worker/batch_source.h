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
#include <string>

#include "common/cell/cell_spec.h"
#include "worker/model_zoo.h"

namespace scalebench {

/// A contiguous range of global sample indices [first, first + count).
struct SampleRange {
  int64_t first = 0;
  int64_t count = 0;
  bool operator==(const SampleRange&) const = default;
};

struct HostBatch {
  torch::Tensor inputs;   ///< [count, input_shape...] of the model's input dtype
  torch::Tensor targets;  ///< int64 [count] class ids, or [count, D, H, W] voxel labels
};

/// An uninitialised batch of `count` samples: inputs [count, input_shape...] of
/// `input_dtype`, int64 targets [count, target_shape...], in pinned memory when
/// `pin_memory`.
HostBatch allocate_host_batch(int64_t count, const std::vector<int64_t>& input_shape,
                              torch::ScalarType input_dtype,
                              const std::vector<int64_t>& target_shape, bool pin_memory);

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  /// Samples `range.first` .. `range.first + range.count - 1`, freshly allocated (pinned
  /// memory comes from Torch's caching host allocator, which does not reuse a block while
  /// a non_blocking copy from it is in flight). Throws CellError(FailurePhase::kData) for data that
  /// cannot be used (a label outside [0, num_classes), an unreadable file).
  [[nodiscard]] virtual HostBatch make_batch(SampleRange range) const = 0;
  /// Per-rank metrics of the source (e.g. data_open_s, data_rows); empty for synthetic.
  [[nodiscard]] virtual std::map<std::string, double> metrics() const { return {}; }
};

/// The batch source of `cell`: synthetic, or HDF5 with `cell.data.path` resolved against
/// `tree` (Assignment::tree). `model` gives the input dtype, the per-sample shapes and
/// synthetic samples. Throws CellError(FailurePhase::kDataOpen) for an HDF5 file that cannot be
/// used.
std::unique_ptr<BatchSource> make_batch_source(const CellSpec& cell, const ModelInfo& model,
                                               const std::vector<int64_t>& input_shape,
                                               int64_t num_classes, const std::string& tree,
                                               bool pin_memory);

}  // namespace scalebench
