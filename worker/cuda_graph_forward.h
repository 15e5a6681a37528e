// CUDA graph capture of a model's inference forward (the `cuda_graphs` setting).
//
// Note [CUDA graphs for inference]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A captured forward replays every kernel of one forward pass with a single launch; what
// it saves is the host's cost of launching kernels one by one (large for small batches and
// models of many small layers). A graph is bound to fixed buffers and one shape, so the
// inference workload captures one graph per batch shape it will run (the full batch, and
// its shard's last, smaller batch) before the timed loop, outside every timer (metric
// cuda_graph_capture_s). In the loop, phase h2d copies the host batch straight into the
// graph's static input (layout conversion to channels-last included) and phase forward is
// the replay. Capture follows PyTorch's recipe (torch.cuda.graphs): warm-up forwards on a
// side stream first (lazy initialisation, cuDNN autotuning), capture on that stream, the
// autocast weight cache off while capturing. A model that cannot be captured (a host
// synchronisation, a CPU op, a data-dependent shape) fails the cell (phase model_init) with
// CUDA's reason: a cell labelled cuda_graphs=true never runs eagerly.
//
// Training cells are refused at plan time (matrix check_cell): scalebench's DDP step is not
// static (gradient buckets are reduced from autograd hooks as they become ready, the
// optimizer step and every phase are timed separately, and the MPI backend runs on the host),
// so no capture of it would measure the step the label names.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "common/cell/cell_spec.h"
#include "worker/models/zoo_model.h"

namespace scalebench {

/// One captured forward pass on fixed input/output buffers.
class CapturedForward {
 public:
  virtual ~CapturedForward() = default;
  /// The graph's input buffer: copy each batch into it (its shape is the captured one).
  virtual torch::Tensor& input() = 0;
  /// Replays the graph on the current stream; the returned output buffer is overwritten by
  /// the next replay.
  virtual const torch::Tensor& replay() = 0;
};

#ifdef SCALEBENCH_HAVE_CUDA
/// Captures `model.forward` (eval mode, no grad, autocast to `precision`) on an input buffer
/// shaped, laid out and placed like `example` (a CUDA tensor). Throws CellError (phase
/// model_init) naming the model's problem when capture fails. Defined in
/// cuda_graph_forward_cuda.cc.
std::unique_ptr<CapturedForward> capture_forward(models::ZooModel& model,
                                                 const torch::Tensor& example, Precision precision);
#endif

}  // namespace scalebench
