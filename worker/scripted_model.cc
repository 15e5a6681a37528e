#include "worker/scripted_model.h"

#include <torch/version.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <unordered_set>

#include "common/base/error.h"

namespace scalebench {
namespace {

/// nn::Module names may not contain '.': "layer1.0.conv1.weight" -> "layer1_0_conv1_weight",
/// made unique among `taken` (parameter and buffer names share one namespace) by an index
/// suffix when two names collide after the replacement; the result is added to `taken`.
std::string module_safe_name(const std::string& name, std::unordered_set<std::string>& taken) {
  std::string safe = name;
  std::replace(safe.begin(), safe.end(), '.', '_');
  std::string unique = safe;
  for (int suffix = 1; !taken.insert(unique).second; ++suffix) {
    unique = safe + "_" + std::to_string(suffix);
  }
  return unique;
}

}  // namespace

ScriptedModel::ScriptedModel(torch::jit::Module module, std::string source)
    : module_(std::move(module)), source_(std::move(source)) {
  // A tensor under several names (tied weights) is registered once, as Python's
  // parameters() lists it once: else the optimizer would step it twice and
  // parameter_count would count it twice. state_entries() keeps every name.
  std::unordered_set<const c10::TensorImpl*> registered;
  std::unordered_set<std::string> names;
  for (const auto& parameter : module_.named_parameters(/*recurse=*/true)) {
    if (!registered.insert(parameter.value.unsafeGetTensorImpl()).second) continue;
    register_parameter(module_safe_name(parameter.name, names), parameter.value,
                       parameter.value.requires_grad());
  }
  for (const auto& buffer : module_.named_buffers(/*recurse=*/true)) {
    if (!registered.insert(buffer.value.unsafeGetTensorImpl()).second) continue;
    register_buffer(module_safe_name(buffer.name, names), buffer.value);
  }
}

torch::Tensor ScriptedModel::forward(torch::Tensor input) {
  const torch::IValue output = module_.forward({std::move(input)});
  if (!output.isTensor()) {
    throw CellError(FailurePhase::kForward,
                    "TorchScript model " + source_ + " returned " + output.tagKind() +
                        ", scalebench needs forward(x) -> Tensor (logits): return "
                        "the logits alone from the exported module");
  }
  return output.toTensor();
}

void ScriptedModel::train(bool on) {
  torch::nn::Module::train(on);
  module_.train(on);
}

models::NamedState ScriptedModel::state_entries() {
  models::NamedState entries;
  for (const auto& parameter : module_.named_parameters(/*recurse=*/true)) {
    entries.emplace_back(parameter.name, parameter.value);
  }
  for (const auto& buffer : module_.named_buffers(/*recurse=*/true)) {
    entries.emplace_back(buffer.name, buffer.value);
  }
  return entries;
}

std::shared_ptr<ScriptedModel> load_scripted_model(const std::string& bytes,
                                                   const std::string& source) {
  if (bytes.empty()) {
    throw CellError(FailurePhase::kModelInit,
                    "TorchScript model " + source +
                        ": rank 0 sent no bytes (an empty file?): export it with "
                        "torch.jit.save(torch.jit.script(model), path)");
  }
  std::istringstream stream(bytes);
  try {
    return std::make_shared<ScriptedModel>(torch::jit::load(stream, torch::kCPU), source);
  } catch (const c10::Error& error) {
    throw CellError(
        FailurePhase::kModelInit,
        "TorchScript model " + source + " is not a TorchScript archive this LibTorch (" +
            std::string(TORCH_VERSION) + ") can load: " + error.what_without_backtrace() +
            "; export it with torch.jit.save(torch.jit.script(model), "
            "path) from a compatible PyTorch");
  }
}

ModelInfo scripted_model_info(const CellSpec& cell, std::string artifact) {
  ModelInfo info;
  info.name = "torchscript:" + cell.model.torchscript;
  info.default_input_shape = cell.input_shape;
  info.default_num_classes = cell.num_classes;
  info.check = [source = cell.model.torchscript](const std::vector<int64_t>& shape,
                                                 int64_t classes) {
    if (shape.empty() || classes < 1) {
      throw InputError("TorchScript model " + source +
                       " needs input_shape and num_classes >= 1 in the matrix");
    }
  };
  info.build = [bytes = std::move(artifact), source = cell.model.torchscript](
                   const std::vector<int64_t>&, int64_t) -> std::shared_ptr<models::ZooModel> {
    return load_scripted_model(bytes, source);
  };
  info.make_sample = make_normal_sample;
  return info;
}

}  // namespace scalebench
