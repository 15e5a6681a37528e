// Note [CUDA graphs for inference] (cuda_graph_forward.h): capture and replay.
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>

#include "common/base/error.h"
#include "worker/cuda_graph_forward.h"
#include "worker/workload.h"

namespace scalebench {
namespace {

/// Warm-up forwards before capture (PyTorch's recipe uses 3; cuDNN autotuning and lazy
/// initialisation happen here, not inside the graph).
constexpr int kWarmupForwards = 3;

/// The autocast weight cache off for the scope: cached casts made outside a capture would
/// be read by the graph but not recomputed on replay.
class AutocastCacheOff {
 public:
  AutocastCacheOff() : previous_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~AutocastCacheOff() { at::autocast::set_autocast_cache_enabled(previous_); }
  AutocastCacheOff(const AutocastCacheOff&) = delete;
  AutocastCacheOff& operator=(const AutocastCacheOff&) = delete;

 private:
  bool previous_;
};

class CudaGraphForward : public CapturedForward {
 public:
  CudaGraphForward(models::ZooModel& model, const torch::Tensor& example, Precision precision)
      : input_(torch::zeros_like(example)) {
    const torch::Device device = example.device();
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, device.index());
    torch::NoGradGuard no_grad;
    AutocastCacheOff cache_off;
    // Before the loop, so whole-device synchronisation is the simple way to order the
    // side stream after the input's allocation and the default stream after the capture.
    torch::cuda::synchronize(device.index());
    {
      c10::cuda::CUDAStreamGuard on_side(side);
      for (int i = 0; i < kWarmupForwards; ++i) {
        AutocastScope autocast(precision, device);
        model.forward(input_);
      }
      graph_.capture_begin();
      try {
        AutocastScope autocast(precision, device);
        output_ = model.forward(input_);
      } catch (...) {
        abandon_capture();
        throw;
      }
      graph_.capture_end();
    }
    torch::cuda::synchronize(device.index());
  }

  torch::Tensor& input() override { return input_; }

  const torch::Tensor& replay() override {
    graph_.replay();
    return output_;
  }

 private:
  /// Ends a capture whose forward threw, so that the stream is usable again; CUDA's error
  /// from ending it is secondary to the forward's and is dropped.
  void abandon_capture() {
    try {
      graph_.capture_end();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the forward's error is the one to report
    }
  }

  torch::Tensor input_;
  torch::Tensor output_;
  at::cuda::CUDAGraph graph_;
};

}  // namespace

std::unique_ptr<CapturedForward> capture_forward(models::ZooModel& model,
                                                 const torch::Tensor& example,
                                                 Precision precision) {
  try {
    return std::make_unique<CudaGraphForward>(model, example, precision);
  } catch (const c10::Error& error) {
    throw CellError(FailurePhase::kModelInit,
                    "cuda_graphs: this model cannot be captured in a CUDA graph for batch shape " +
                        c10::str(example.sizes()) + " (" + error.what_without_backtrace() +
                        "); run it with cuda_graphs: false");
  }
}

}  // namespace scalebench
