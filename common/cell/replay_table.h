// The layer table of a replayed model (`model: {replay: path}`, docs/replay.md): what a
// replay cell waits for per layer and which gradients each layer produces. Torch-free and
// pure: parsing, the parameters' bytes in model order, and the backward schedule.
//
// Note [Replay workload]
// ~~~~~~~~~~~~~~~~~~~~~~
// A replay cell trains nothing: its forward, backward and optimizer are timed waits that
// replay a real model's per-layer times, and its gradients are real buffers of that model's
// parameter sizes, reduced as DDP reduces them. What is real: the buckets
// (compute_bucket_assignment_by_size over the replayed parameters, the cell's
// first_bucket_bytes and bucket_bytes), their launch in bucket order as soon as the
// backward of the layers holding their parameters has ended (the rule of Note [Gradient
// buckets]), the allreduce of each bucket on the cell's backend (MPI's communication thread
// or NCCL's stream) and the wait for them (`comm_wait`). What is replayed: the time of each
// layer's forward and backward, the data and optimizer phases. So the communication of a
// model can be measured at world sizes whose compute a machine cannot afford: a sleep takes
// no core, and eight ranks of a ResNet-50 replay fit on two cores.
//
// The gradient buffers are the buckets themselves: no parameter tensors, no copy of a
// gradient into its bucket, no division after the allreduce and no optimizer arithmetic.
// On a CPU those copies would be real work competing for the cores that the replay exists
// to leave free, and on a GPU they are the part of `comm_wait` that the projection models
// as a constant (docs/projection.md); a replay's comm_wait is the allreduces alone.
//
// Times are seconds as measured by the table's source (its `source` says how); `jitter`
// scales a rank's whole iteration by max(0.5, 1 + jitter * z), z a standard normal drawn
// per rank and iteration from the cell's seed: the ranks' iterations then differ as
// independent draws, which is what the projection's slowest-of-N model assumes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace scalebench {

/// One layer, in model (forward) order: its forward and backward time and the element
/// counts of the parameters it owns (model order; empty for a layer without parameters).
struct ReplayLayer {
  std::string name;
  double forward_s = 0.0;
  double backward_s = 0.0;
  std::vector<int64_t> parameter_elements;
  bool operator==(const ReplayLayer&) const = default;
};

/// A parsed layer table. Element size 4 (fp32 gradients) or 2 (16-bit gradients).
struct ReplayTable {
  std::string model;   ///< what is replayed, e.g. "resnet50"
  std::string source;  ///< how the times were measured
  int64_t element_bytes = 4;
  double data_s = 0.0;       ///< data loading per iteration
  double optimizer_s = 0.0;  ///< optimizer step per iteration
  double jitter = 0.0;       ///< relative sd of a rank's iteration (Note [Replay workload])
  std::vector<ReplayLayer> layers;
  bool operator==(const ReplayTable&) const = default;

  /// Bytes of every parameter in model order (layer by layer).
  [[nodiscard]] std::vector<int64_t> parameter_bytes() const;
  /// Sum of every layer's forward_s / backward_s.
  [[nodiscard]] double forward_s() const;
  [[nodiscard]] double backward_s() const;
};

/// Parses the JSON text of a layer table (docs/replay.md#the-layer-table). `where` names
/// the file in messages. Throws InputError naming the key and what it needs: a missing or
/// negative time, an element size other than 2 or 4, no layer, no parameter at all, a
/// parameter count below 1, jitter outside [0, 0.5].
ReplayTable parse_replay_table(const std::string& json_text, const std::string& where);

/// The backward schedule: for each layer of `table` in backward order (last layer first),
/// the model-order indices of the parameters whose gradients are complete once that
/// layer's backward has ended. Index i of the result is layer (layers - 1 - i).
std::vector<std::vector<size_t>> backward_ready_parameters(const ReplayTable& table);

}  // namespace scalebench
