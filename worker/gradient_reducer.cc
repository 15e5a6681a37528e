#include "worker/gradient_reducer.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "common/base/error.h"
#include "common/cell/bucket_assignment.h"

// Note [Gradient buckets]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Layout. The parameters that require grad, in model order, are grouped by
// compute_bucket_assignment_by_size (common/cell/bucket_assignment.h): reverse order, because
// the last layers' gradients are computed first in backward; the first bucket small
// (ReducerOptions::first_bucket_bytes) so that communication starts early, the others
// up to bucket_bytes; one dtype and device per bucket. Each bucket owns one flat
// contiguous buffer; parameter i has a fixed slice of it (ascending model order).
//
// Hooks. For each parameter the reducer holds its grad accumulator (the AccumulateGrad
// autograd node, torch::autograd::impl::grad_accumulator) and adds a FunctionPostHook to
// it, as c10d's Reducer does. The post hook runs after AccumulateGrad has written
// param.grad(), once per backward with the gradient summed over every use of the
// parameter. Tensor::register_hook would see the incoming gradient before accumulation
// instead, and Tensor's post-accumulate-grad hook slot is reserved for Python. Holding
// the accumulator keeps it (and so the hook) alive across iterations: autograd graphs
// only reference it weakly through the parameter.
//
// Order. A hook copies param.grad() into its slice; when a bucket's last gradient is in,
// buckets are launched (backend.allreduce_sum) strictly in bucket index order: bucket
// b+1 waits until bucket b is launched even if it is ready first. Every rank therefore
// issues the same collectives in the same order, which MPI and NCCL require.
//
// Overlap. Launches happen during backward, so the allreduce of bucket 0 runs while
// autograd computes the gradients of earlier layers: on the NCCL stream, or on the MPI
// backend's communication thread. finalize() waits for every bucket, divides by the
// world size and copies each slice back into param.grad(); its duration, timed by the
// caller as `comm_wait`, is the communication that backward did not hide.
//
// Unused parameters. A parameter that does not take part in this iteration's loss gets
// no gradient, so no hook fires and its bucket never completes during backward. finalize()
// writes zeros into the slices of such parameters, counts them, and launches the buckets
// still pending, again in index order, so no rank waits for a collective another rank
// never issues. Since a parameter can be unused on one rank and used on another, every
// rank then sets grad = mean over ranks for every reduced parameter (defining .grad()
// where it was undefined): all replicas see the same gradients and stay identical.

namespace scalebench {
namespace {

/// Bucket key: tensors of different dtype or device never share a flat buffer.
int64_t dtype_device_key(const torch::Tensor& tensor) {
  const auto device = tensor.device();
  return (static_cast<int64_t>(tensor.scalar_type()) << 24) |
         (static_cast<int64_t>(device.type()) << 8) | (static_cast<int64_t>(device.index()) + 1);
}

/// Calls back into the reducer when AccumulateGrad has run for parameter `index`.
class GradReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(std::function<void(size_t)> on_ready, size_t index)
      : on_ready_(std::move(on_ready)), index_(index) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    on_ready_(index_);
    return outputs;
  }

 private:
  std::function<void(size_t)> on_ready_;
  size_t index_;
};

}  // namespace

struct GradientReducer::Impl {
  // Nested, not file-local: a type with linkage may not hold file-local types (GCC's
  // -Wsubobject-linkage in a unity build, Note [Unity build]).
  struct Bucket {
    torch::Tensor buffer;                  ///< flat, contiguous; one slice per parameter
    size_t pending = 0;                    ///< gradients still missing this iteration
    std::unique_ptr<CollectiveWork> work;  ///< set once launched
  };

  struct Slot {
    size_t bucket = 0;
    int64_t offset = 0;  ///< elements
  };

  Impl(std::vector<torch::Tensor> parameters, CollectiveBackend& comm, ReducerOptions opts);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  [[nodiscard]] torch::Tensor slice(size_t index) const {
    const auto& param = params[index];
    return buckets[slots[index].bucket]
        .buffer.narrow(0, slots[index].offset, param.numel())
        .view(param.sizes());
  }
  void on_grad_ready(size_t index);
  void launch_ready_buckets(bool in_backward);

  std::vector<torch::Tensor> all_params;  ///< as given: all are broadcast
  std::vector<torch::Tensor> params;      ///< requires_grad only: all are reduced
  CollectiveBackend& backend;
  std::vector<std::vector<size_t>> assignment;
  std::vector<Bucket> buckets;
  std::vector<Slot> slots;
  /// The parameters' gradient accumulators, held so that their hooks stay registered. The
  /// handle's type follows LibTorch: std::shared_ptr<Node> up to 2.11 (the PyTorch of the GPU
  /// nodes), c10::intrusive_ptr<Node> in later releases (the venv's).
  using AccumulatorHandle =
      decltype(torch::autograd::impl::grad_accumulator(std::declval<const torch::Tensor&>()));
  std::vector<AccumulatorHandle> accumulators;
  std::vector<uintptr_t> hook_keys;

  std::mutex mutex;  ///< guards the per-iteration state below (hooks vs training thread)
  std::vector<bool> ready;
  size_t next_to_launch = 0;
  bool armed = false;
  ReducerIterationStats stats;
  ReducerIterationStats last_stats;
};

GradientReducer::Impl::Impl(std::vector<torch::Tensor> parameters, CollectiveBackend& comm,
                            ReducerOptions opts)
    : all_params(std::move(parameters)), backend(comm) {
  std::vector<int64_t> bytes;
  std::vector<int64_t> keys;
  for (const auto& param : all_params) {
    if (!param.requires_grad()) continue;
    if (!param.is_leaf() || param.is_sparse()) {
      throw CellError(FailurePhase::kModelInit,
                      "gradient reducer: parameters must be dense leaf tensors");
    }
    params.push_back(param);
    bytes.push_back(param.numel() * static_cast<int64_t>(param.element_size()));
    keys.push_back(dtype_device_key(param));
  }
  assignment =
      compute_bucket_assignment_by_size(bytes, opts.first_bucket_bytes, opts.bucket_bytes, keys);
  slots.resize(params.size());
  for (size_t b = 0; b < assignment.size(); ++b) {
    int64_t numel = 0;
    for (const size_t i : assignment[b]) {
      slots[i] = Slot{b, numel};
      numel += params[i].numel();
    }
    const auto& first = params[assignment[b].front()];
    Bucket bucket;
    bucket.buffer =
        torch::zeros({numel}, torch::TensorOptions().dtype(first.dtype()).device(first.device()));
    buckets.push_back(std::move(bucket));
  }
  ready.assign(params.size(), false);
  for (size_t i = 0; i < params.size(); ++i) {
    accumulators.push_back(torch::autograd::impl::grad_accumulator(params[i]));
    hook_keys.push_back(accumulators.back()->add_post_hook(
        std::make_unique<GradReadyHook>([this](size_t index) { on_grad_ready(index); }, i)));
  }
}

GradientReducer::Impl::~Impl() {
  for (size_t i = 0; i < accumulators.size(); ++i) accumulators[i]->del_post_hook(hook_keys[i]);
}

void GradientReducer::Impl::on_grad_ready(size_t index) {
  std::lock_guard lock(mutex);
  if (!armed) return;  // a backward outside prepare_for_backward()/finalize(): not ours
  if (ready[index]) {
    throw CellError(FailurePhase::kBackward,
                    "gradient of parameter " + std::to_string(index) +
                        " arrived twice in one iteration: run one backward "
                        "between prepare_for_backward() and finalize()");
  }
  ready[index] = true;
  const torch::NoGradGuard no_grad;
  const auto& grad = params[index].grad();
  if (grad.defined()) {
    slice(index).copy_(grad);
  } else {
    slice(index).zero_();
  }
  if (--buckets[slots[index].bucket].pending == 0) launch_ready_buckets(/*in_backward=*/true);
}

void GradientReducer::Impl::launch_ready_buckets(bool in_backward) {
  while (next_to_launch < buckets.size() && buckets[next_to_launch].pending == 0) {
    Bucket& bucket = buckets[next_to_launch];
    stats.buckets[next_to_launch].launched = std::chrono::steady_clock::now();
    stats.buckets[next_to_launch].bytes = static_cast<int64_t>(bucket.buffer.nbytes());
    bucket.work = backend.allreduce_sum(bucket.buffer);
    ++(in_backward ? stats.buckets_launched_in_backward : stats.buckets_launched_in_finalize);
    ++next_to_launch;
  }
}

GradientReducer::GradientReducer(std::vector<torch::Tensor> parameters, CollectiveBackend& backend,
                                 ReducerOptions options)
    : impl_(std::make_unique<Impl>(std::move(parameters), backend, options)) {}

GradientReducer::~GradientReducer() = default;

void GradientReducer::broadcast_parameters(const std::vector<torch::Tensor>& buffers) {
  const torch::NoGradGuard no_grad;
  // One flat broadcast per (dtype, device), in first-appearance order (same on all ranks).
  std::vector<std::vector<torch::Tensor>> groups;
  std::map<int64_t, size_t> group_of_key;
  const std::vector<torch::Tensor>& params = impl_->all_params;
  for (const auto* list : {&params, &buffers}) {
    for (const auto& tensor : *list) {
      if (!tensor.defined() || tensor.numel() == 0) continue;
      const auto [it, added] = group_of_key.emplace(dtype_device_key(tensor), groups.size());
      if (added) groups.emplace_back();
      groups[it->second].push_back(tensor);
    }
  }
  for (auto& group : groups) {
    std::vector<torch::Tensor> flat_parts;
    flat_parts.reserve(group.size());
    for (const auto& tensor : group) flat_parts.push_back(tensor.reshape({-1}));
    torch::Tensor flat = torch::cat(flat_parts);
    impl_->backend.broadcast(flat, 0);
    int64_t offset = 0;
    for (auto& tensor : group) {
      tensor.copy_(flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
      offset += tensor.numel();
    }
  }
}

void GradientReducer::prepare_for_backward() {
  std::lock_guard lock(impl_->mutex);
  for (const auto& bucket : impl_->buckets) {
    if (bucket.work) {
      throw CellError(FailurePhase::kBackward,
                      "prepare_for_backward() while the previous iteration's allreduces are "
                      "in flight: call finalize() after every backward");
    }
  }
  for (size_t b = 0; b < impl_->buckets.size(); ++b) {
    impl_->buckets[b].pending = impl_->assignment[b].size();
  }
  impl_->ready.assign(impl_->params.size(), false);
  impl_->next_to_launch = 0;
  impl_->stats = ReducerIterationStats{};
  impl_->stats.buckets.resize(impl_->buckets.size());
  impl_->armed = true;
}

void GradientReducer::finalize() {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.mutex);
  if (!impl.armed) {
    throw CellError(FailurePhase::kBackward,
                    "finalize() without prepare_for_backward() before backward");
  }
  impl.armed = false;
  const torch::NoGradGuard no_grad;
  // See Note [Gradient buckets]: unused parameters contribute zeros.
  for (size_t i = 0; i < impl.params.size(); ++i) {
    if (impl.ready[i]) continue;
    impl.ready[i] = true;
    impl.slice(i).zero_();
    --impl.buckets[impl.slots[i].bucket].pending;
    ++impl.stats.unused_parameters;
  }
  impl.launch_ready_buckets(/*in_backward=*/false);
  const double world = static_cast<double>(impl.backend.size());
  for (size_t b = 0; b < impl.buckets.size(); ++b) {
    Impl::Bucket& bucket = impl.buckets[b];
    const auto work = std::move(bucket.work);
    work->wait();
    impl.stats.buckets[b].completed = work->completed_at();
    bucket.buffer.div_(world);
  }
  for (size_t i = 0; i < impl.params.size(); ++i) {
    auto& grad = impl.params[i].mutable_grad();
    if (grad.defined() && grad.sizes() == impl.params[i].sizes()) {
      grad.copy_(impl.slice(i));
    } else {
      grad = impl.slice(i).clone();
    }
  }
  impl.last_stats = impl.stats;
}

const std::vector<std::vector<size_t>>& GradientReducer::buckets() const {
  return impl_->assignment;
}

ReducerIterationStats GradientReducer::last_iteration_stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->last_stats;
}

}  // namespace scalebench
