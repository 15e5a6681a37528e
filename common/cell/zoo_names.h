// The names and input contracts of the built-in model zoo, without Torch.
//
// The worker builds the models (worker/); the matrix front end needs only their names,
// default input shapes and the shape rules, to reject a bad matrix before anything runs.
// This table is the one place those facts live on the plain-C++ side; the worker's zoo
// must accept every shape that `check_shape` accepts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace scalebench {

struct ZooModelInfo {
  std::string name;                    ///< "resnet18", ...
  std::vector<int64_t> default_shape;  ///< per-sample input shape used when none is given
  size_t input_rank = 0;               ///< required number of per-sample dimensions
  int64_t default_classes = 0;         ///< classes (or output channels, unet3d) by default
  std::string shape_rule;              ///< the shape rule in words, for docs and messages
};

/// Every zoo model, in a fixed order.
const std::vector<ZooModelInfo>& zoo_models();

/// The names of `zoo_models()`, same order.
std::vector<std::string> zoo_model_names();

/// The entry for `name`, or nullptr when `name` is not a zoo model.
const ZooModelInfo* find_zoo_model(const std::string& name);

/// "" when `shape` (per sample, no batch dimension) suits `model`; otherwise what is wrong
/// and what shape would be accepted.
std::string check_shape(const ZooModelInfo& model, const std::vector<int64_t>& shape);

/// "[3, 224, 224]"
std::string format_shape(const std::vector<int64_t>& shape);

}  // namespace scalebench
