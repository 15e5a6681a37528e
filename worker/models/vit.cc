// ViT-B/16 with torchvision's parameter layout (conv patch projection, class token,
// position embedding, 12 pre-norm blocks, final LayerNorm, linear head).
#include "worker/models/encoder_block.h"
#include "worker/models/zoo_model.h"

namespace scalebench::models {
namespace {

constexpr int64_t kPatch = 16;
constexpr int64_t kDim = 768;
constexpr int64_t kDepth = 12;
constexpr int64_t kVitHeads = 12;
constexpr int64_t kMlpDim = 3072;

int64_t vit_tokens(const std::vector<int64_t>& input_shape) {
  return (input_shape.at(1) / kPatch) * (input_shape.at(2) / kPatch) + 1;
}

class VisionTransformer : public ZooModel {
 public:
  VisionTransformer(int64_t channels, int64_t tokens, int64_t num_classes) {
    conv_proj_ = register_module(
        "conv_proj",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, kDim, kPatch).stride(kPatch)));
    class_token_ = register_parameter("class_token", torch::zeros({1, 1, kDim}));
    pos_embedding_ =
        register_parameter("pos_embedding", torch::randn({1, tokens, kDim}).mul_(0.02));
    for (int64_t i = 0; i < kDepth; ++i) {
      layers_->push_back(EncoderBlock(kDim, kVitHeads, kMlpDim, 1e-6));
    }
    register_module("layers", layers_);
    ln_ =
        register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDim}).eps(1e-6)));
    head_ = register_module("head", torch::nn::Linear(kDim, num_classes));
  }
  torch::Tensor forward(torch::Tensor input) override {
    auto x = conv_proj_->forward(input).flatten(2).transpose(1, 2);  // [B, patches, dim]
    x = torch::cat({class_token_.expand({x.size(0), 1, kDim}).to(x.dtype()), x}, 1);
    x = layers_->forward(x + pos_embedding_);
    return head_->forward(ln_->forward(x).select(1, 0));
  }

 private:
  torch::nn::Conv2d conv_proj_{nullptr};
  torch::Tensor class_token_, pos_embedding_;
  torch::nn::Sequential layers_;
  torch::nn::LayerNorm ln_{nullptr};
  torch::nn::Linear head_{nullptr};
};

}  // namespace

std::shared_ptr<ZooModel> build_vit_b16(const std::vector<int64_t>& input_shape,
                                        int64_t num_classes) {
  return std::make_shared<VisionTransformer>(input_shape.at(0), vit_tokens(input_shape),
                                             num_classes);
}

double vit_b16_forward_macs(const std::vector<int64_t>& input_shape, int64_t num_classes) {
  const int64_t tokens = vit_tokens(input_shape);
  const double patch =
      static_cast<double>((tokens - 1) * kDim * input_shape.at(0) * kPatch * kPatch);
  return patch + kDepth * encoder_block_macs(tokens, kDim, kMlpDim) +
         static_cast<double>(kDim * num_classes);
}

}  // namespace scalebench::models
