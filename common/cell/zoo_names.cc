#include "common/cell/zoo_names.h"

namespace scalebench {
namespace {

/// "" when every dimension from `first` on is a multiple of `divisor` and >= `minimum`.
std::string check_spatial(const std::vector<int64_t>& shape, size_t first, int64_t divisor,
                          int64_t minimum, const char* names) {
  for (size_t i = first; i < shape.size(); ++i) {
    if (shape[i] < minimum || shape[i] % divisor != 0) {
      return std::string("dimensions ") + names + " must be multiples of " +
             std::to_string(divisor) + " and at least " + std::to_string(minimum) + ", got " +
             format_shape(shape);
    }
  }
  return "";
}

}  // namespace

const std::vector<ZooModelInfo>& zoo_models() {
  static const std::vector<ZooModelInfo> kModels{
      {"mlp", {784}, 1, 10, "[features]"},
      {"resnet18", {3, 224, 224}, 3, 1000, "[C, H, W] with H, W >= 32"},
      {"resnet50", {3, 224, 224}, 3, 1000, "[C, H, W] with H, W >= 32"},
      {"vit_b16", {3, 224, 224}, 3, 1000, "[C, H, W] with H, W multiples of 16"},
      {"unet3d", {1, 64, 64, 64}, 4, 2, "[C, D, H, W] with D, H, W multiples of 8"},
      {"transformer", {128}, 1, 2, "[sequence length]"},
  };
  return kModels;
}

std::vector<std::string> zoo_model_names() {
  std::vector<std::string> names;
  for (const auto& model : zoo_models()) names.push_back(model.name);
  return names;
}

const ZooModelInfo* find_zoo_model(const std::string& name) {
  for (const auto& model : zoo_models()) {
    if (model.name == name) return &model;
  }
  return nullptr;
}

std::string format_shape(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::string check_shape(const ZooModelInfo& model, const std::vector<int64_t>& shape) {
  const std::string expected = "; " + model.name + " takes " + model.shape_rule + ", e.g. " +
                               format_shape(model.default_shape);
  if (shape.size() != model.input_rank) {
    return "input_shape " + format_shape(shape) + " has " + std::to_string(shape.size()) +
           " dimensions, " + model.name + " needs " + std::to_string(model.input_rank) + expected;
  }
  for (const int64_t dim : shape) {
    if (dim < 1) return "input_shape " + format_shape(shape) + " has a dimension < 1" + expected;
  }
  std::string problem;
  if (model.name == "resnet18" || model.name == "resnet50") {
    problem = check_spatial(shape, 1, 1, 32, "H, W");
  } else if (model.name == "vit_b16") {
    problem = check_spatial(shape, 1, 16, 16, "H, W");
  } else if (model.name == "unet3d") {
    problem = check_spatial(shape, 1, 8, 8, "D, H, W");
  }
  return problem.empty() ? "" : problem + expected;
}

}  // namespace scalebench
