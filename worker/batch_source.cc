#include "worker/batch_source.h"

#include "common/base/error.h"
#include "common/cell/messages.h"
#include "worker/hdf5_batches.h"
#include "worker/synthetic_data.h"

namespace scalebench {

TargetSpec cell_targets(const CellSpec& cell, const ModelInfo& model,
                        const std::vector<int64_t>& input_shape, int64_t num_classes,
                        const std::vector<int64_t>& output_shape) {
  TargetSpec targets;
  targets.num_classes = num_classes;
  targets.loss = cell.loss;
  targets.used = cell.mode == Mode::kTrain;
  // Inference has no loss (the matrix resets it to auto): its synthetic class ids only keep
  // the load phase as it was.
  switch (targets.used ? parse_loss(cell.loss) : Loss::kCrossEntropy) {
    case Loss::kCrossEntropy:
      // TorchScript models say nothing about their targets: an HDF5 file's per-row shape
      // is accepted.
      if (cell.model.torchscript.empty() && cell.model.aoti.empty()) {
        targets.shape = target_shape(model, input_shape);
      }
      return targets;
    case Loss::kBceWithLogits:
      targets.kind = TargetSpec::Kind::kUnitValues;
      break;
    case Loss::kMse:
    case Loss::kL1:
    case Loss::kSmoothL1:
      targets.kind = TargetSpec::Kind::kValues;
      break;
  }
  targets.shape = output_shape;
  return targets;
}

torch::Tensor allocate_rows(int64_t count, const std::vector<int64_t>& shape,
                            torch::ScalarType dtype, bool pin_memory) {
  std::vector<int64_t> sizes = {count};
  sizes.insert(sizes.end(), shape.begin(), shape.end());
  return torch::empty(sizes, torch::TensorOptions().dtype(dtype).pinned_memory(pin_memory));
}

std::unique_ptr<BatchSource> make_batch_source(const CellSpec& cell, const ModelInfo& model,
                                               const std::vector<int64_t>& input_shape,
                                               const TargetSpec& targets, const std::string& tree,
                                               bool pin_memory) {
  if (cell.data.kind == "synthetic") {
    return std::make_unique<SyntheticData>(model, input_shape, targets, cell.seed, pin_memory);
  }
  if (cell.data.kind != "hdf5") {
    throw CellError(
        FailurePhase::kDataOpen,
        "data kind \"" + cell.data.kind + "\" is unknown to this worker: use synthetic or hdf5");
  }
  try {
    return std::make_unique<Hdf5Batches>(resolve_in_tree(tree, cell.data.path), cell.data.inputs,
                                         cell.data.targets, input_shape, model.input_dtype, targets,
                                         pin_memory);
  } catch (const CellError& error) {
    if (cell.source.empty()) throw;
    throw CellError(error.phase(),
                    std::string(error.what()) + " (experiment at " + cell.source + ")");
  }
}

}  // namespace scalebench
