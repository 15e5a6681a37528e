// The registry behind worker/model_zoo.h.
#include <algorithm>
#include <map>

#include "common/base/error.h"
#include "common/cell/output_comparison.h"
#include "common/cell/zoo_names.h"
#include "worker/model_zoo.h"

namespace scalebench {
namespace {

using Shape = std::vector<int64_t>;

/// Throws InputError with common/cell/zoo_names.h's text unless `shape` suits the model (the
/// matrix front end checks with the same rules, so a validated matrix never fails here).
void require_shape(const std::string& model, const Shape& shape) {
  const ZooModelInfo* rules = find_zoo_model(model);
  const std::string problem = rules ? check_shape(*rules, shape) : "no shape rules for " + model;
  if (!problem.empty()) {
    throw InputError("model " + model + ": " + problem + " (change the experiment's input_shape)");
  }
}

void require_classes(const std::string& model, int64_t num_classes) {
  if (num_classes < 1) {
    throw InputError("model " + model + ": num_classes must be >= 1, got " +
                     std::to_string(num_classes));
  }
}

ModelInfo image_classifier(std::string name, Shape default_shape, int64_t classes) {
  ModelInfo info;
  info.name = std::move(name);
  info.default_input_shape = std::move(default_shape);
  info.default_num_classes = classes;
  info.make_sample = make_normal_sample;
  return info;
}

ModelInfo mlp_info() {
  ModelInfo info = image_classifier("mlp", {784}, 10);
  info.check = [](const Shape& shape, int64_t classes) {
    require_shape("mlp", shape);
    require_classes("mlp", classes);
  };
  info.build = models::build_mlp;
  info.forward_flops_per_sample = [](const Shape& s, int64_t c) {
    return 2 * models::mlp_forward_macs(s, c);
  };
  return info;
}

ModelInfo resnet_info(int depth) {
  const std::string name = "resnet" + std::to_string(depth);
  ModelInfo info = image_classifier(name, {3, 224, 224}, 1000);
  info.check = [name](const Shape& shape, int64_t classes) {
    require_shape(name, shape);
    require_classes(name, classes);
  };
  info.build = [depth](const Shape& s, int64_t c) { return models::build_resnet(depth, s, c); };
  info.forward_flops_per_sample = [depth](const Shape& s, int64_t c) {
    return 2 * models::resnet_forward_macs(depth, s, c);
  };
  return info;
}

ModelInfo vit_info() {
  ModelInfo info = image_classifier("vit_b16", {3, 224, 224}, 1000);
  info.check = [](const Shape& shape, int64_t classes) {
    require_shape("vit_b16", shape);
    require_classes("vit_b16", classes);
  };
  info.build = models::build_vit_b16;
  info.forward_flops_per_sample = [](const Shape& s, int64_t c) {
    return 2 * models::vit_b16_forward_macs(s, c);
  };
  return info;
}

ModelInfo unet3d_info() {
  ModelInfo info;
  info.name = "unet3d";
  info.default_input_shape = {1, 64, 64, 64};
  info.default_num_classes = 2;
  info.per_voxel_target = true;
  info.check = [](const Shape& shape, int64_t classes) {
    require_shape("unet3d", shape);
    require_classes("unet3d", classes);
  };
  info.build = models::build_unet3d;
  info.forward_flops_per_sample = [](const Shape& s, int64_t c) {
    return 2 * models::unet3d_forward_macs(s, c);
  };
  info.make_sample = make_normal_sample;  // random_ fills every voxel label of `target`
  return info;
}

ModelInfo transformer_info() {
  ModelInfo info;
  info.name = "transformer";
  info.default_input_shape = {128};
  info.default_num_classes = 2;
  info.input_dtype = torch::kInt64;
  info.check = [](const Shape& shape, int64_t classes) {
    require_shape("transformer", shape);
    require_classes("transformer", classes);
  };
  info.build = models::build_transformer;
  info.forward_flops_per_sample = [](const Shape& s, int64_t c) {
    return 2 * models::transformer_forward_macs(s, c);
  };
  info.make_sample = [](const torch::Tensor& input, const torch::Tensor& target,
                        int64_t num_classes, at::Generator& generator) {
    input.random_(0, models::kTransformerVocab, generator);
    if (target.defined()) target.random_(0, num_classes, generator);
  };
  return info;
}

const std::map<std::string, ModelInfo>& registry() {
  static const std::map<std::string, ModelInfo> entries = [] {
    std::map<std::string, ModelInfo> map;
    for (ModelInfo info : {mlp_info(), resnet_info(18), resnet_info(50), vit_info(), unet3d_info(),
                           transformer_info()}) {
      map.emplace(info.name, std::move(info));
    }
    return map;
  }();
  return entries;
}

}  // namespace

void make_normal_sample(const torch::Tensor& input, const torch::Tensor& target,
                        int64_t num_classes, at::Generator& generator) {
  input.normal_(0.0, 1.0, generator);
  if (target.defined()) target.random_(0, num_classes, generator);
}

const ModelInfo& find_model(const std::string& name) {
  const auto& entries = registry();
  const auto found = entries.find(name);
  if (found == entries.end()) {
    std::string known;
    for (const auto& [key, info] : entries) known += (known.empty() ? "" : ", ") + key;
    throw InputError("unknown zoo model \"" + name + "\": use one of " + known);
  }
  return found->second;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [key, info] : registry()) names.push_back(key);
  return names;
}

std::vector<int64_t> target_shape(const ModelInfo& info, const std::vector<int64_t>& input_shape) {
  if (!info.per_voxel_target) return {};
  return {input_shape.begin() + 1, input_shape.end()};
}

Loss parse_loss(const std::string& name) {
  static const std::map<std::string, Loss> losses = {{"auto", Loss::kCrossEntropy},
                                                     {"cross_entropy", Loss::kCrossEntropy},
                                                     {"mse", Loss::kMse},
                                                     {"l1", Loss::kL1},
                                                     {"smooth_l1", Loss::kSmoothL1},
                                                     {"bce_with_logits", Loss::kBceWithLogits}};
  const auto found = losses.find(name);
  if (found == losses.end()) {
    throw InputError("unknown loss \"" + name +
                     "\": use auto, cross_entropy, mse, l1, smooth_l1 or bce_with_logits");
  }
  return found->second;
}

bool has_float_targets(Loss loss) { return loss != Loss::kCrossEntropy; }

torch::Tensor task_loss(const torch::Tensor& logits, const torch::Tensor& targets, Loss loss) {
  namespace F = torch::nn::functional;
  const torch::Tensor output = logits.to(torch::kFloat32);
  if (loss == Loss::kCrossEntropy) return F::cross_entropy(output, targets);
  if (output.sizes() != targets.sizes()) {
    throw CellError(FailurePhase::kForward,
                    "the model returned " + shape_text(output.sizes().vec()) +
                        " for a batch whose float targets are " +
                        shape_text(targets.sizes().vec()) +
                        ": a regression or bce_with_logits loss needs targets of the output's "
                        "shape (docs/own-model.md#losses)");
  }
  switch (loss) {
    case Loss::kMse:
      return F::mse_loss(output, targets);
    case Loss::kL1:
      return F::l1_loss(output, targets);
    case Loss::kSmoothL1:
      return F::smooth_l1_loss(output, targets);
    case Loss::kBceWithLogits:
      return F::binary_cross_entropy_with_logits(output, targets);
    case Loss::kCrossEntropy:
      break;
  }
  throw CellError(FailurePhase::kForward, "unhandled loss");
}

int64_t parameter_count(torch::nn::Module& module) {
  int64_t count = 0;
  for (const auto& parameter : module.parameters()) count += parameter.numel();
  return count;
}

}  // namespace scalebench
