// NCCL collective backend (GPU). See Note [NCCL stream ordering].
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <mpi.h>
#include <torch/torch.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "common/base/error.h"
#include "common/base/logging.h"
#include "protocol/mpi_check.h"
#include "worker/collective_backend.h"
#include "worker/cuda_check.h"

// Note [NCCL stream ordering]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Collectives run on the backend's own stream so that they overlap compute. Before a
// collective, an event recorded on the caller's current (compute) stream makes the NCCL
// stream wait, so the collective sees every kernel that produced its input. After it, an
// event recorded on the NCCL stream is what CollectiveWork::wait() makes the waiting
// thread's current stream wait on: the host never blocks. The tensor's memory is recorded
// on the NCCL stream (CUDACachingAllocator::recordStream) so that freeing it early cannot
// hand the block to another kernel while NCCL still uses it.
//
// The communicator is created non-blocking (config.blocking = 0): every NCCL call may
// return ncclInProgress, and the backend polls ncclCommGetAsyncError until it settles.
// Between polls it releases its lock, so abort() from another thread (a cell timeout
// watchdog) can always take it and call ncclCommAbort, which also ends kernels that wait
// for a dead peer; the polling thread then throws NcclError.

namespace scalebench {
namespace {

using Clock = std::chrono::steady_clock;

/// How long the destructor lets ncclCommFinalize flush before it aborts instead.
constexpr std::chrono::seconds kFinalizeTimeout{30};

ncclDataType_t nccl_datatype(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat:
      return ncclFloat32;
    case torch::kDouble:
      return ncclFloat64;
    case torch::kHalf:
      return ncclFloat16;
    case torch::kBFloat16:
      return ncclBfloat16;
    case torch::kInt:
      return ncclInt32;
    case torch::kLong:
      return ncclInt64;
    case torch::kChar:
      return ncclInt8;
    case torch::kByte:
      return ncclUint8;
    default:
      throw CellError(FailurePhase::kCommunication,
                      std::string("NCCL backend cannot handle dtype ") + c10::toString(dtype));
  }
}

/// Owns a CUDA event without timing (cudaEventDestroy on destruction).
class UntimedCudaEvent {
 public:
  UntimedCudaEvent() { CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~UntimedCudaEvent() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  UntimedCudaEvent(const UntimedCudaEvent&) = delete;
  UntimedCudaEvent& operator=(const UntimedCudaEvent&) = delete;
  [[nodiscard]] cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

/// Owns a non-blocking CUDA stream on the current device (cudaStreamDestroy on destruction).
class CudaStream {
 public:
  CudaStream() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  [[nodiscard]] cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// Polls a non-blocking communicator until `result` is no longer ncclInProgress or the
/// deadline passes (then returns ncclInProgress).
ncclResult_t poll_until_settled(ncclComm_t comm, ncclResult_t result, Clock::time_point deadline) {
  while (result == ncclInProgress && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (ncclCommGetAsyncError(comm, &result) != ncclSuccess) return ncclSystemError;
  }
  return result;
}

/// Owns an NCCL communicator. Destruction flushes it (ncclCommFinalize, bounded by
/// kFinalizeTimeout) and destroys it, or aborts it when flushing fails or times out.
class NcclComm {
 public:
  NcclComm() = default;
  ~NcclComm() {
    if (comm_ == nullptr) return;
    const ncclResult_t flushed =
        poll_until_settled(comm_, ncclCommFinalize(comm_), Clock::now() + kFinalizeTimeout);
    if (flushed == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      SB_LOG(warning) << "NCCL communicator did not finalize (" << ncclGetErrorString(flushed)
                      << "); aborting it";
      ncclCommAbort(comm_);
    }
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  [[nodiscard]] ncclComm_t get() const { return comm_; }
  ncclComm_t* out() { return &comm_; }
  /// ncclCommAbort; the handle is empty afterwards.
  void abort() {
    if (comm_ == nullptr) return;
    const ncclResult_t result = ncclCommAbort(comm_);
    if (result != ncclSuccess && result != ncclInProgress) {
      SB_LOG(warning) << "ncclCommAbort: " << nccl_error_reason(result);
    }
    comm_ = nullptr;
  }

 private:
  ncclComm_t comm_ = nullptr;
};

class NcclBackend;

class NcclWork final : public CollectiveWork {
 public:
  NcclWork(NcclBackend& backend, std::unique_ptr<UntimedCudaEvent> done, c10::DeviceIndex device)
      : backend_(backend), done_(std::move(done)), device_(device) {}
  void wait() override;

 private:
  NcclBackend& backend_;
  std::unique_ptr<UntimedCudaEvent> done_;
  c10::DeviceIndex device_;
};

class NcclBackend final : public CollectiveBackend {
 public:
  NcclBackend(MPI_Comm group, int device_index)
      : device_(static_cast<c10::DeviceIndex>(device_index)) {
    const c10::cuda::CUDAGuard guard(device_);
    MPI_CHECK(MPI_Comm_rank(group, &rank_));
    MPI_CHECK(MPI_Comm_size(group, &size_));
    ncclUniqueId id{};
    if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group));
    stream_ = std::make_unique<CudaStream>();
    before_ = std::make_unique<UntimedCudaEvent>();
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    std::unique_lock lock(mutex_);
    try {
      NCCL_CHECK(settled(lock, ncclCommInitRankConfig(comm_.out(), size_, id, rank_, &config)));
    } catch (...) {
      comm_.abort();
      throw;
    }
    SB_LOG(debug) << "NCCL communicator ready: rank " << rank_ << " of " << size_
                  << " on cuda:" << device_index << ", " << nccl_version_string();
  }

  [[nodiscard]] std::string name() const override { return "nccl"; }
  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }

  std::unique_ptr<CollectiveWork> allreduce_sum(torch::Tensor tensor) override {
    return launch(tensor, "allreduce_sum", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                           nccl_datatype(tensor.scalar_type()), ncclSum, comm, stream);
    });
  }

  void broadcast(torch::Tensor tensor, int root) override {
    if (root < 0 || root >= size_) {
      throw CellError(FailurePhase::kCommunication, "broadcast root " + std::to_string(root) +
                                                        " is outside the group of " +
                                                        std::to_string(size_));
    }
    launch(tensor, "broadcast", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                           nccl_datatype(tensor.scalar_type()), root, comm, stream);
    })->wait();
  }

  void allreduce_sum_into(const torch::Tensor& input, torch::Tensor output) override {
    require_like(input, output, output.numel(), "allreduce_sum_into");
    launch(output, "allreduce_sum_into", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllReduce(input.data_ptr(), output.data_ptr(), input.numel(),
                           nccl_datatype(input.scalar_type()), ncclSum, comm, stream);
    })->wait();
    record_on_nccl_stream(input);
  }

  void allgather(const torch::Tensor& input, torch::Tensor output) override {
    require_like(input, output, output.numel() / size_, "allgather");
    launch(output, "allgather", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(),
                           nccl_datatype(input.scalar_type()), comm, stream);
    })->wait();
    record_on_nccl_stream(input);
  }

  bool abort() override {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    comm_.abort();
    return true;
  }

  /// Throws NcclError if the communicator reported an asynchronous error or was aborted.
  void check_async_error() {
    std::unique_lock lock(mutex_);
    throw_if_aborted();
    ncclResult_t state = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_.get(), &state));
    NCCL_CHECK(settled(lock, state));
  }

 private:
  template <typename Call>
  std::unique_ptr<CollectiveWork> launch(const torch::Tensor& tensor, const char* what,
                                         const Call& call) {
    if (!tensor.defined() || !tensor.is_cuda() || tensor.get_device() != device_ ||
        !tensor.is_contiguous()) {
      throw CellError(FailurePhase::kCommunication,
                      std::string("NCCL backend ") + what +
                          " needs a contiguous tensor on cuda:" + std::to_string(device_));
    }
    const c10::cuda::CUDAGuard guard(device_);
    const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(device_).stream();
    auto done = std::make_unique<UntimedCudaEvent>();
    std::unique_lock lock(mutex_);
    throw_if_aborted();
    CUDA_CHECK(cudaEventRecord(before_->get(), compute));
    CUDA_CHECK(cudaStreamWaitEvent(stream_->get(), before_->get(), 0));
    NCCL_CHECK(settled(lock, call(comm_.get(), stream_->get())));
    CUDA_CHECK(cudaEventRecord(done->get(), stream_->get()));
    c10::cuda::CUDACachingAllocator::recordStream(
        tensor.storage().data_ptr(), c10::cuda::getStreamFromExternal(stream_->get(), device_));
    return std::make_unique<NcclWork>(*this, std::move(done), device_);
  }

  /// `input` must be a contiguous tensor on this device of `output`'s dtype with `count`
  /// elements (the per-rank share of `output`).
  void require_like(const torch::Tensor& input, const torch::Tensor& output, int64_t count,
                    const char* what) const {
    if (!input.defined() || !input.is_cuda() || input.get_device() != device_ ||
        !input.is_contiguous() || !output.defined() ||
        input.scalar_type() != output.scalar_type() || input.numel() != count) {
      throw CellError(FailurePhase::kCommunication,
                      std::string("NCCL backend ") + what +
                          ": the input must be a contiguous tensor on cuda:" +
                          std::to_string(device_) + " of the output's dtype and share");
    }
  }

  /// The caching allocator must not reuse `tensor`'s memory before the NCCL stream is done.
  void record_on_nccl_stream(const torch::Tensor& tensor) const {
    c10::cuda::CUDACachingAllocator::recordStream(
        tensor.storage().data_ptr(), c10::cuda::getStreamFromExternal(stream_->get(), device_));
  }

  /// Waits out ncclInProgress, releasing `lock` between polls so abort() can run.
  ncclResult_t settled(std::unique_lock<std::mutex>& lock, ncclResult_t result) {
    while (result == ncclInProgress) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      lock.lock();
      throw_if_aborted();
      NCCL_CHECK(ncclCommGetAsyncError(comm_.get(), &result));
    }
    return result;
  }

  void throw_if_aborted() const {
    if (aborted_) {
      throw NcclError(
          format_library_error("NCCL", __FILE__, __LINE__, "communicator",
                               "aborted (abort() was called); " + nccl_version_string()));
    }
  }

  c10::DeviceIndex device_;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<CudaStream> stream_;
  std::unique_ptr<UntimedCudaEvent> before_;  ///< reused: recorded on the compute stream per call
  std::mutex mutex_;                          ///< guards comm_ and aborted_
  bool aborted_ = false;
  NcclComm comm_;  ///< declared after stream_: destroyed before it
};

void NcclWork::wait() {
  backend_.check_async_error();
  const c10::cuda::CUDAGuard guard(device_);
  CUDA_CHECK(
      cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream(device_).stream(), done_->get(), 0));
}

}  // namespace

std::unique_ptr<CollectiveBackend> make_nccl_backend(MPI_Comm group, int device_index) {
  return std::make_unique<NcclBackend>(group, device_index);
}

}  // namespace scalebench
