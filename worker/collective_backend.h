// Collective communication for one cell's group, behind one interface.
//
// Implementations: MPI (CPU tensors; CUDA tensors staged through host memory) and NCCL
// (CUDA tensors, its own stream, non-blocking communicator that can be aborted).
// Thread safety: calls must not overlap in time, but may come from different threads in
// sequence (the reducer launches allreduces from autograd hooks, which run on the engine's
// device thread for CUDA tensors, and waits from the training thread after backward).
// abort() is the exception: it may be called from any thread at any time.
// A backend must outlive every CollectiveWork it returned.
#pragma once

#include <mpi.h>
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace scalebench {

/// An in-flight collective. wait() blocks until `tensor` holds the result (on GPU: until
/// the compute stream is ordered after it, without a host sync).
class CollectiveWork {
 public:
  virtual ~CollectiveWork() = default;
  virtual void wait() = 0;
  /// After wait(): when the collective itself finished, where the backend knows it (MPI:
  /// the moment its communication thread completed the job, host steady clock); nullopt
  /// where it does not (NCCL: the GPU completes it later on its stream).
  [[nodiscard]] virtual std::optional<std::chrono::steady_clock::time_point> completed_at() const {
    return std::nullopt;
  }
};

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  [[nodiscard]] virtual std::string name() const = 0;  ///< "mpi" or "nccl"
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  /// Starts an in-place elementwise sum over the group; `tensor` must stay alive and
  /// untouched until wait() returns. Contiguous tensors only.
  virtual std::unique_ptr<CollectiveWork> allreduce_sum(torch::Tensor tensor) = 0;
  /// Blocking in-place broadcast from group rank `root` (NCCL: returns once the caller's
  /// current stream is ordered after it, like CollectiveWork::wait()). Contiguous only.
  virtual void broadcast(torch::Tensor tensor, int root) = 0;
  /// Blocking out-of-place sum: `output` (same shape and dtype as `input`) gets the group's
  /// elementwise sum of `input`, which is left unchanged. Contiguous only.
  virtual void allreduce_sum_into(const torch::Tensor& input, torch::Tensor output) = 0;
  /// Blocking allgather: `output` ([size * input.numel()] elements, same dtype) gets every
  /// rank's `input`, in group-rank order. Contiguous only.
  virtual void allgather(const torch::Tensor& input, torch::Tensor output) = 0;
  /// Ends any pending collective so a hung cell can be abandoned (NCCL: ncclCommAbort).
  /// After abort() the backend is unusable. MPI cannot cancel a collective: it returns false.
  virtual bool abort() = 0;
};

/// MPI backend over a duplicate of `group` (MPI_Comm_dup; freed on destruction).
std::unique_ptr<CollectiveBackend> make_mpi_backend(MPI_Comm group);

#ifdef SCALEBENCH_HAVE_CUDA
/// NCCL backend: unique id made on group rank 0 and broadcast over `group`; uses
/// `device_index`. Throws NcclError (NCCL_CHECK) on failure.
std::unique_ptr<CollectiveBackend> make_nccl_backend(MPI_Comm group, int device_index);
#endif

}  // namespace scalebench
