// A TorchScript module (exported from Python with torch.jit.script / torch.jit.trace and
// torch.jit.save) as a benchmark model, next to the zoo.
//
// Contract: the module's forward takes one tensor (the batch, [B, input_shape...]) and
// returns one tensor (logits [B, classes], or [B, classes, spatial...] for per-voxel
// tasks). Its parameters and buffers are registered in the nn::Module wrapper as the
// same tensors (same storage), so the optimizer, the gradient reducer, .to(device),
// channels-last and parameter counts see exactly the TorchScript module's state;
// checkpoints match the TorchScript names ("fc1.weight"). See docs/own-model.md.
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <string>

#include "common/cell/cell_spec.h"
#include "worker/model_zoo.h"

namespace scalebench {

class ScriptedModel : public models::ZooModel {
 public:
  /// `source` names the module in messages (its path in the branch tree).
  ScriptedModel(torch::jit::Module module, std::string source);

  /// Runs the module's forward; throws CellError(FailurePhase::kForward) when it does not return a
  /// tensor.
  torch::Tensor forward(torch::Tensor input) override;
  /// Also switches the TorchScript module (dropout, batch-norm statistics).
  void train(bool on = true) override;
  /// Parameters and buffers under their TorchScript names.
  models::NamedState state_entries() override;

 private:
  torch::jit::Module module_;
  std::string source_;
};

/// Deserialises a TorchScript archive (the bytes of a torch.jit.save file) on the CPU.
/// Throws CellError(FailurePhase::kModelInit) naming `source` when the bytes are not one.
std::shared_ptr<ScriptedModel> load_scripted_model(const std::string& bytes,
                                                   const std::string& source);

/// The ModelInfo of a TorchScript cell: `build` loads `artifact` (the module's bytes);
/// inputs are float32 with the cell's input_shape (required by the matrix), synthetic
/// samples are N(0, 1) inputs with a class id in [0, num_classes) as target; there is no
/// analytic FLOP count (forward_flops_per_sample is empty).
ModelInfo scripted_model_info(const CellSpec& cell, std::string artifact);

}  // namespace scalebench
