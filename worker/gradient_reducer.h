// DDP gradient averaging with bucketed allreduce that overlaps backward.
//
// See Note [Gradient buckets] in gradient_reducer.cc. Usage per iteration:
//   reducer.prepare_for_backward();   // before loss.backward()
//   loss.backward();                   // hooks launch each bucket's allreduce when ready
//   reducer.finalize();                // waits for all buckets, writes averaged grads
// The caller times finalize() as `comm_wait`: communication not hidden by backward.
// Thread safety: one training thread calls the methods; hooks may run on autograd threads.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "worker/collective_backend.h"

namespace scalebench {

struct ReducerOptions {
  int64_t bucket_bytes = 25LL * 1024 * 1024;       ///< size cap of every bucket but the first
  int64_t first_bucket_bytes = 1LL * 1024 * 1024;  ///< size cap of the first bucket
};

/// One bucket's allreduce in one iteration (host steady clock), for the per-rank timeline.
struct BucketTiming {
  std::chrono::steady_clock::time_point launched;
  /// CollectiveWork::completed_at: when the collective finished, where the backend knows it.
  std::optional<std::chrono::steady_clock::time_point> completed;
  int64_t bytes = 0;
};

/// What happened in one iteration, for tests and logs.
struct ReducerIterationStats {
  size_t buckets_launched_in_backward = 0;  ///< allreduces started by autograd hooks
  size_t buckets_launched_in_finalize = 0;  ///< held back (unused parameters) until finalize()
  size_t unused_parameters = 0;             ///< reduced parameters whose grad never arrived
  std::vector<BucketTiming> buckets;        ///< by bucket index
};

class GradientReducer {
 public:
  /// `parameters` in model order (model->parameters()); only those with requires_grad
  /// are reduced. `backend` must outlive the reducer. Registers autograd hooks.
  GradientReducer(std::vector<torch::Tensor> parameters, CollectiveBackend& backend,
                  ReducerOptions options);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// Broadcasts every parameter (and `buffers`, e.g. BatchNorm stats) from group rank 0.
  void broadcast_parameters(const std::vector<torch::Tensor>& buffers);
  /// Resets per-iteration state; call before each backward.
  void prepare_for_backward();
  /// Waits for every bucket's allreduce and leaves each parameter's .grad() = mean over ranks.
  void finalize();
  /// Bucket layout chosen at construction: indices into the reduced-parameter list.
  [[nodiscard]] const std::vector<std::vector<size_t>>& buckets() const;
  /// Counts of the last completed finalize() (all zero before the first).
  [[nodiscard]] ReducerIterationStats last_iteration_stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scalebench
