// MPI collective backend. See Note [MPI communication thread].
#include <mpi.h>
#include <torch/torch.h>

#include <chrono>
#include <climits>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "common/base/error.h"
#include "common/base/logging.h"
#include "protocol/mpi_check.h"
#include "protocol/mpi_comm.h"
#include "worker/collective_backend.h"

// Note [MPI communication thread]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// MPI collectives block the calling thread, so to overlap gradient allreduce with
// backward on CPU the backend runs every collective on one dedicated thread that takes
// jobs from a FIFO queue (like c10d's ProcessGroupMPI). The FIFO keeps the order in which
// collectives are issued, which must be the same on every rank. The thread only calls MPI
// on raw host buffers; every Torch operation (staging a CUDA tensor to host, the float32
// copy of a 16-bit tensor, the copy back) happens on the caller's thread: staging in
// allreduce_sum(), the copy back in CollectiveWork::wait().
//
// That needs MPI_THREAD_MULTIPLE (the caller's thread and other code use MPI too). When
// MPI granted less, the backend logs a warning and runs "deferred": jobs are queued the
// same way but executed, in order, by whichever thread calls wait() (or broadcast()), so
// MPI is still called from one thread at a time and from the waiting (main) thread, never
// from an autograd device thread. Deferred mode gives correct results without overlap.
//
// The destructor drains the queue (every issued collective still runs), because peers
// have issued the matching calls; MPI cannot cancel a collective, so abort() returns false.

namespace scalebench {
namespace {

enum class JobKind { kAllreduceSum, kBroadcast, kAllreduceInto, kAllgather };

/// Completion of one job; shared by the queue and the CollectiveWork.
struct JobState {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;
  std::chrono::steady_clock::time_point finished_at;  ///< when the job completed

  void finish(std::exception_ptr failure) {
    {
      std::lock_guard lock(mutex);
      done = true;
      error = std::move(failure);
      finished_at = std::chrono::steady_clock::now();
    }
    done_cv.notify_all();
  }
  [[nodiscard]] bool is_done() {
    std::lock_guard lock(mutex);
    return done;
  }
  void wait_and_rethrow() {
    std::unique_lock lock(mutex);
    done_cv.wait(lock, [this] { return done; });
    if (error) std::rethrow_exception(error);
  }
};

/// One collective on a contiguous host buffer. `buffer` keeps the memory alive.
struct Job {
  JobKind kind = JobKind::kAllreduceSum;
  torch::Tensor buffer;
  MPI_Datatype datatype = MPI_BYTE;
  int64_t count = 0;  ///< elements of `datatype`
  int root = 0;
  std::shared_ptr<JobState> state;
  torch::Tensor output;  ///< kAllreduceInto, kAllgather: the receive buffer (`buffer` sends)
};

/// MPI datatype for reducing `dtype`; 16-bit floats are reduced as a float32 copy.
MPI_Datatype reduce_datatype(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat:
    case torch::kHalf:
    case torch::kBFloat16:
      return MPI_FLOAT;
    case torch::kDouble:
      return MPI_DOUBLE;
    case torch::kInt:
      return MPI_INT32_T;
    case torch::kLong:
      return MPI_INT64_T;
    case torch::kChar:
      return MPI_INT8_T;
    case torch::kByte:
      return MPI_UINT8_T;
    default:
      throw CellError(
          FailurePhase::kCommunication,
          std::string("MPI backend cannot sum tensors of dtype ") + c10::toString(dtype));
  }
}

/// Runs one job on `comm`, in pieces of at most INT_MAX elements (MPI counts are int).
void run_job(const Job& job, MPI_Comm comm) {
  int type_bytes = 0;
  MPI_CHECK(MPI_Type_size(job.datatype, &type_bytes));
  auto* data = static_cast<char*>(job.buffer.data_ptr());
  if (job.kind == JobKind::kAllgather) {  // one call: the count was checked against INT_MAX
    const int count = static_cast<int>(job.count);
    MPI_CHECK(
        MPI_Allgather(data, count, job.datatype, job.output.data_ptr(), count, job.datatype, comm));
    return;
  }
  for (int64_t done = 0; done < job.count;) {
    const int piece = static_cast<int>(std::min<int64_t>(job.count - done, INT_MAX));
    void* start = data + done * type_bytes;
    if (job.kind == JobKind::kAllreduceSum) {
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, start, piece, job.datatype, MPI_SUM, comm));
    } else if (job.kind == JobKind::kAllreduceInto) {
      void* target = static_cast<char*>(job.output.data_ptr()) + done * type_bytes;
      MPI_CHECK(MPI_Allreduce(start, target, piece, job.datatype, MPI_SUM, comm));
    } else {
      MPI_CHECK(MPI_Bcast(start, piece, job.datatype, job.root, comm));
    }
    done += piece;
  }
}

/// Host buffer the MPI job works on: `tensor` itself when it is a CPU tensor of an MPI
/// type, else a CPU copy (float32 for 16-bit floats). Blocks on a CUDA tensor's stream.
torch::Tensor host_buffer(const torch::Tensor& tensor, bool for_reduce) {
  const bool sixteen_bit =
      tensor.scalar_type() == torch::kHalf || tensor.scalar_type() == torch::kBFloat16;
  const auto dtype = for_reduce && sixteen_bit ? torch::kFloat : tensor.scalar_type();
  return tensor.to(torch::TensorOptions().device(torch::kCPU).dtype(dtype)).contiguous();
}

class MpiWork final : public CollectiveWork {
 public:
  MpiWork(std::shared_ptr<JobState> state, std::function<void(JobState*)> run_pending,
          torch::Tensor target, torch::Tensor staged)
      : state_(std::move(state)),
        run_pending_(std::move(run_pending)),
        target_(std::move(target)),
        staged_(std::move(staged)) {}

  void wait() override {
    if (waited_) return;
    if (run_pending_) run_pending_(state_.get());
    state_->wait_and_rethrow();
    if (!staged_.is_same(target_)) target_.copy_(staged_);
    waited_ = true;
  }

  [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> completed_at() const override {
    if (!waited_) return std::nullopt;
    std::lock_guard lock(state_->mutex);
    return state_->finished_at;
  }

 private:
  std::shared_ptr<JobState> state_;
  std::function<void(JobState*)> run_pending_;  ///< deferred mode only
  torch::Tensor target_;
  torch::Tensor staged_;
  bool waited_ = false;
};

class MpiBackend final : public CollectiveBackend {
 public:
  explicit MpiBackend(MPI_Comm group) {
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_dup(group, &dup));
    comm_ = Communicator(dup);
    MPI_CHECK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    rank_ = comm_.rank();
    size_ = comm_.size();
    int provided = MPI_THREAD_SINGLE;
    MPI_CHECK(MPI_Query_thread(&provided));
    threaded_ = provided == MPI_THREAD_MULTIPLE;
    if (threaded_) {
      thread_ = std::thread([this] { serve(); });
    } else {
      SB_LOG(warning) << "MPI granted thread level " << provided
                      << ", not MPI_THREAD_MULTIPLE: the MPI backend runs collectives in "
                         "wait(), without overlap with backward";
    }
  }

  ~MpiBackend() override {
    if (threaded_) {
      {
        std::lock_guard lock(mutex_);
        stopping_ = true;
      }
      queue_cv_.notify_all();
      thread_.join();
    } else {
      run_deferred_until(nullptr);
    }
  }

  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;

  [[nodiscard]] std::string name() const override { return "mpi"; }
  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }

  std::unique_ptr<CollectiveWork> allreduce_sum(torch::Tensor tensor) override {
    require_contiguous(tensor, "allreduce_sum");
    const MPI_Datatype datatype = reduce_datatype(tensor.scalar_type());
    torch::Tensor staged = host_buffer(tensor, /*for_reduce=*/true);
    auto state =
        enqueue(Job{JobKind::kAllreduceSum, staged, datatype, staged.numel(), 0, nullptr, {}});
    std::function<void(JobState*)> run_pending;
    if (!threaded_) run_pending = [this](JobState* until) { run_deferred_until(until); };
    return std::make_unique<MpiWork>(std::move(state), std::move(run_pending), std::move(tensor),
                                     std::move(staged));
  }

  void broadcast(torch::Tensor tensor, int root) override {
    require_contiguous(tensor, "broadcast");
    if (root < 0 || root >= size_) {
      throw CellError(FailurePhase::kCommunication, "broadcast root " + std::to_string(root) +
                                                        " is outside the group of " +
                                                        std::to_string(size_));
    }
    torch::Tensor staged = host_buffer(tensor, /*for_reduce=*/false);
    const int64_t bytes = staged.numel() * static_cast<int64_t>(staged.element_size());
    auto state = enqueue(Job{JobKind::kBroadcast, staged, MPI_BYTE, bytes, root, nullptr, {}});
    if (!threaded_) run_deferred_until(state.get());
    state->wait_and_rethrow();
    if (!staged.is_same(tensor)) tensor.copy_(staged);
  }

  void allreduce_sum_into(const torch::Tensor& input, torch::Tensor output) override {
    require_contiguous(input, "allreduce_sum_into");
    require_contiguous(output, "allreduce_sum_into");
    require_share(input, output, output.numel(), "allreduce_sum_into");
    const MPI_Datatype datatype = reduce_datatype(input.scalar_type());
    const torch::Tensor staged_input = host_buffer(input, /*for_reduce=*/true);
    torch::Tensor staged_output = host_buffer(output, /*for_reduce=*/true);
    run_blocking(Job{JobKind::kAllreduceInto, staged_input, datatype, staged_input.numel(), 0,
                     nullptr, staged_output});
    if (!staged_output.is_same(output)) output.copy_(staged_output);
  }

  void allgather(const torch::Tensor& input, torch::Tensor output) override {
    require_contiguous(input, "allgather");
    require_contiguous(output, "allgather");
    require_share(input, output, output.numel() / size_, "allgather");
    const torch::Tensor staged_input = host_buffer(input, /*for_reduce=*/false);
    torch::Tensor staged_output = host_buffer(output, /*for_reduce=*/false);
    const int64_t bytes = staged_input.numel() * static_cast<int64_t>(staged_input.element_size());
    if (bytes > INT_MAX) {
      throw CellError(FailurePhase::kCommunication,
                      "MPI backend allgather: " + std::to_string(bytes) +
                          " bytes per rank is above MPI's int count; use a smaller message");
    }
    run_blocking(
        Job{JobKind::kAllgather, staged_input, MPI_BYTE, bytes, 0, nullptr, staged_output});
    if (!staged_output.is_same(output)) output.copy_(staged_output);
  }

  bool abort() override { return false; }

 private:
  /// `input` holds `count` elements of `output`'s dtype (its share of `output`).
  static void require_share(const torch::Tensor& input, const torch::Tensor& output, int64_t count,
                            const char* what) {
    if (input.scalar_type() != output.scalar_type() || input.numel() != count) {
      throw CellError(FailurePhase::kCommunication,
                      std::string("MPI backend ") + what +
                          ": the input must have the output's dtype and its share of elements");
    }
  }

  /// Queues `job` behind every earlier collective and waits for it.
  void run_blocking(Job job) {
    auto state = enqueue(std::move(job));
    if (!threaded_) run_deferred_until(state.get());
    state->wait_and_rethrow();
  }

  static void require_contiguous(const torch::Tensor& tensor, const char* what) {
    if (!tensor.defined() || !tensor.is_contiguous()) {
      throw CellError(FailurePhase::kCommunication,
                      std::string("MPI backend ") + what + " needs a defined contiguous tensor");
    }
  }

  std::shared_ptr<JobState> enqueue(Job job) {
    job.state = std::make_shared<JobState>();
    auto state = job.state;
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(job));
    }
    queue_cv_.notify_one();
    return state;
  }

  /// The communication thread: runs jobs in FIFO order until stopped and drained.
  void serve() {
    while (true) {
      Job job;
      {
        std::unique_lock lock(mutex_);
        queue_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      execute(job);
    }
  }

  /// Deferred mode: runs queued jobs in order on this thread until `until` is done
  /// (nullptr: until the queue is empty). Never throws; failures go to each job's state.
  void run_deferred_until(JobState* until) {
    std::lock_guard run_lock(deferred_mutex_);
    if (until != nullptr && until->is_done()) return;
    while (true) {
      Job job;
      {
        std::lock_guard lock(mutex_);
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      const bool last = job.state.get() == until;
      execute(job);
      if (last) return;
    }
  }

  void execute(Job& job) {
    std::exception_ptr failure;
    try {
      run_job(job, comm_.get());
    } catch (...) {
      failure = std::current_exception();
    }
    job.buffer = torch::Tensor();
    job.output = torch::Tensor();
    job.state->finish(failure);
  }

  Communicator comm_;
  int rank_ = 0;
  int size_ = 1;
  bool threaded_ = false;
  std::mutex mutex_;  ///< guards queue_ and stopping_
  std::condition_variable queue_cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::mutex deferred_mutex_;  ///< one deferred runner at a time
  std::thread thread_;
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_mpi_backend(MPI_Comm group) {
  return std::make_unique<MpiBackend>(group);
}

}  // namespace scalebench
