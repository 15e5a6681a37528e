#include "worker/batch_source.h"

#include "common/base/error.h"
#include "common/cell/messages.h"
#include "worker/hdf5_batches.h"
#include "worker/synthetic_data.h"

namespace scalebench {

HostBatch allocate_host_batch(int64_t count, const std::vector<int64_t>& input_shape,
                              torch::ScalarType input_dtype,
                              const std::vector<int64_t>& target_shape, bool pin_memory) {
  auto with_batch = [count](const std::vector<int64_t>& shape) {
    std::vector<int64_t> sizes = {count};
    sizes.insert(sizes.end(), shape.begin(), shape.end());
    return sizes;
  };
  const auto options = torch::TensorOptions().pinned_memory(pin_memory);
  return {torch::empty(with_batch(input_shape), options.dtype(input_dtype)),
          torch::empty(with_batch(target_shape), options.dtype(torch::kInt64))};
}

std::unique_ptr<BatchSource> make_batch_source(const CellSpec& cell, const ModelInfo& model,
                                               const std::vector<int64_t>& input_shape,
                                               int64_t num_classes, const std::string& tree,
                                               bool pin_memory) {
  if (cell.data.kind == "synthetic") {
    return std::make_unique<SyntheticData>(model, input_shape, num_classes, cell.seed, pin_memory);
  }
  if (cell.data.kind != "hdf5") {
    throw CellError(
        FailurePhase::kDataOpen,
        "data kind \"" + cell.data.kind + "\" is unknown to this worker: use synthetic or hdf5");
  }
  // TorchScript models say nothing about their targets: accept the file's per-row shape.
  std::optional<std::vector<int64_t>> expected_target;
  if (cell.model.torchscript.empty() && cell.model.aoti.empty())
    expected_target = target_shape(model, input_shape);
  return std::make_unique<Hdf5Batches>(resolve_in_tree(tree, cell.data.path), cell.data.inputs,
                                       cell.data.targets, input_shape, model.input_dtype,
                                       expected_target, num_classes, pin_memory);
}

}  // namespace scalebench
