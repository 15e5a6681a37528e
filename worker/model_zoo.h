// The model zoo: built-in models registered by name, with their shapes, cost, loss and
// synthetic samples.
//
// Names and defaults (per-sample input shape -> classes):
//   mlp          [784]          -> 10    784-512-512-10, ReLU
//   resnet18     [3, 224, 224]  -> 1000  torchvision ResNet-18 (H, W >= 32)
//   resnet50     [3, 224, 224]  -> 1000  torchvision ResNet-50 (H, W >= 32)
//   vit_b16      [3, 224, 224]  -> 1000  ViT-B/16 (H, W divisible by 16)
//   unet3d       [1, 64, 64, 64] -> 2    3D U-Net, per-voxel logits (D, H, W divisible by 8)
//   transformer  [128] tokens   -> 2     6-layer encoder, d_model 512, vocab 30522
// Thread safety: the registry is immutable after first use; entries are plain data.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "worker/models/zoo_model.h"

namespace scalebench {

/// One registered model.
struct ModelInfo {
  std::string name;
  std::vector<int64_t> default_input_shape;  ///< per sample, no batch dimension
  int64_t default_num_classes = 0;
  /// Throws InputError naming `input_shape` / `num_classes` when the model cannot take them.
  std::function<void(const std::vector<int64_t>& input_shape, int64_t num_classes)> check;
  /// A freshly initialised model on the CPU (uses the global Torch RNG: seed it first).
  std::function<std::shared_ptr<models::ZooModel>(const std::vector<int64_t>& input_shape,
                                                  int64_t num_classes)>
      build;
  /// Analytic forward FLOPs of one sample (2 x multiply-adds; see models/zoo_model.h).
  std::function<double(const std::vector<int64_t>& input_shape, int64_t num_classes)>
      forward_flops_per_sample;
  torch::ScalarType input_dtype = torch::kFloat32;  ///< kInt64 for token ids
  bool per_voxel_target = false;                    ///< target [D, H, W] instead of a class id
  /// Fills one sample in place from `generator` (through the const handles, as ATen's in-place
  /// ops do): `input` has the per-sample shape, `target` is a 0-dim int64 class id or an
  /// int64 [D, H, W] label volume, or undefined (a float loss draws its own targets: see
  /// Note [Targets]). The input is drawn first, so it is the same bytes either way.
  std::function<void(const torch::Tensor& input, const torch::Tensor& target, int64_t num_classes,
                     at::Generator& generator)>
      make_sample;
};

/// ModelInfo::make_sample of image models and TorchScript models: N(0, 1) inputs and
/// uniform labels in [0, num_classes) (one class id, or every voxel of a label volume; none
/// when `target` is undefined).
void make_normal_sample(const torch::Tensor& input, const torch::Tensor& target,
                        int64_t num_classes, at::Generator& generator);

/// Training FLOPs per sample are estimated as this multiple of the forward FLOPs
/// (backward ~ 2 x forward).
inline constexpr double kTrainFlopsFactor = 3.0;

/// The entry for `name`; throws InputError listing the known names when unknown.
const ModelInfo& find_model(const std::string& name);
/// Every registered name, sorted.
std::vector<std::string> model_names();

/// Per-sample target shape: {} for a class id, the input's spatial dims for per-voxel.
std::vector<int64_t> target_shape(const ModelInfo& info, const std::vector<int64_t>& input_shape);

/// A training loss (CellSpec::loss, docs/own-model.md#losses). See Note [Targets] in
/// worker/batch_source.h for the targets each one trains against.
enum class Loss { kCrossEntropy, kMse, kL1, kSmoothL1, kBceWithLogits };

/// The loss named `name`: "auto" (the zoo's rule) and "cross_entropy" are cross entropy.
/// Throws InputError listing the names for any other.
Loss parse_loss(const std::string& name);

/// True for the losses that train against float32 targets of the model output's shape
/// (mse, l1, smooth_l1, bce_with_logits); false for cross entropy (int64 class ids).
bool has_float_targets(Loss loss);

/// The task's loss, a mean computed in float32 whatever the logits' dtype: cross entropy of
/// logits [B, classes, spatial...] against int64 targets [B, spatial...] (over samples, or
/// voxels for unet3d), or the elementwise `loss` against float targets of the logits' shape.
/// Throws CellError(FailurePhase::kForward) when float targets' shape is not the logits'
/// (the loss functions would broadcast them silently).
torch::Tensor task_loss(const torch::Tensor& logits, const torch::Tensor& targets,
                        Loss loss = Loss::kCrossEntropy);

/// Number of elements of all parameters of `module`.
int64_t parameter_count(torch::nn::Module& module);

}  // namespace scalebench
