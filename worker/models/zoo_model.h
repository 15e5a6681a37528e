// The built-in models ("zoo") and their analytic cost, one file per architecture.
//
// Every zoo model is a ZooModel: one tensor in (a batch), one tensor out (logits
// [B, classes], or per-voxel logits [B, classes, D, H, W] for unet3d). Shapes are
// per-sample (no batch dimension) as in CellSpec::input_shape. Builders check nothing:
// ModelInfo::check (set in worker/models/zoo.cc) validates shapes, and workload.cc calls it
// before any builder.
//
// `*_forward_macs` count multiply-accumulates of one sample's forward pass through the
// convolutions, linear layers and attention matmuls (Q K^T and A V); normalisation,
// activations, pooling and softmax are not counted. FLOPs = 2 x MACs.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace scalebench::models {

/// Named tensors of a model's state (parameters, then buffers) as a checkpoint names them.
using NamedState = std::vector<std::pair<std::string, torch::Tensor>>;

/// Parameters then buffers of `module` under their nn::Module names ("0.weight").
NamedState named_state(torch::nn::Module& module);

/// A zoo model: a Module with a single-tensor forward. Also the interface of a TorchScript
/// model (worker/scripted_model.h), so that the workloads treat both alike.
class ZooModel : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor input) = 0;
  /// The state a checkpoint (a torch.save'd state_dict) is matched against, by name.
  virtual NamedState state_entries() { return named_state(*this); }
};

/// Output size of a convolution or pooling window along one dimension.
constexpr int64_t conv_out(int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

/// Product of `shape` (1 for an empty shape).
int64_t product(const std::vector<int64_t>& shape);

/// Multi-layer perceptron: flatten -> 512 -> ReLU -> 512 -> ReLU -> classes.
std::shared_ptr<ZooModel> build_mlp(const std::vector<int64_t>& input_shape, int64_t num_classes);
double mlp_forward_macs(const std::vector<int64_t>& input_shape, int64_t num_classes);

/// torchvision ResNet-18 / ResNet-50 (v1.5: stride on the 3x3 conv), adaptive average pool.
std::shared_ptr<ZooModel> build_resnet(int depth, const std::vector<int64_t>& input_shape,
                                       int64_t num_classes);
double resnet_forward_macs(int depth, const std::vector<int64_t>& input_shape, int64_t num_classes);

/// ViT-B/16: patch 16, width 768, 12 layers, 12 heads, MLP 3072, class token, learned
/// position embedding sized from the input's H x W.
std::shared_ptr<ZooModel> build_vit_b16(const std::vector<int64_t>& input_shape,
                                        int64_t num_classes);
double vit_b16_forward_macs(const std::vector<int64_t>& input_shape, int64_t num_classes);

/// 3D U-Net: 3 down / 3 up levels, base 16 channels, double 3x3x3 conv + BatchNorm + ReLU
/// per level, transposed-conv upsampling, 1x1x1 head to `num_classes` per voxel.
std::shared_ptr<ZooModel> build_unet3d(const std::vector<int64_t>& input_shape,
                                       int64_t num_classes);
double unet3d_forward_macs(const std::vector<int64_t>& input_shape, int64_t num_classes);

/// Token vocabulary of the transformer model (BERT's).
inline constexpr int64_t kTransformerVocab = 30522;
/// Transformer encoder classifier: token + learned position embedding, 6 pre-norm layers
/// (d_model 512, 8 heads, FFN 2048), mean pooling over tokens, linear head.
std::shared_ptr<ZooModel> build_transformer(const std::vector<int64_t>& input_shape,
                                            int64_t num_classes);
double transformer_forward_macs(const std::vector<int64_t>& input_shape, int64_t num_classes);

}  // namespace scalebench::models
