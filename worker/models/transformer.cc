// Transformer encoder classifier over token ids (a BERT-style text model at small scale).
#include "worker/models/encoder_block.h"
#include "worker/models/zoo_model.h"

namespace scalebench::models {
namespace {

constexpr int64_t kDModel = 512;
constexpr int64_t kLayers = 6;
constexpr int64_t kHeads = 8;
constexpr int64_t kFfn = 2048;

class TransformerClassifier : public ZooModel {
 public:
  TransformerClassifier(int64_t tokens, int64_t num_classes) {
    embedding_ = register_module("embedding", torch::nn::Embedding(kTransformerVocab, kDModel));
    pos_embedding_ =
        register_parameter("pos_embedding", torch::randn({1, tokens, kDModel}).mul_(0.02));
    for (int64_t i = 0; i < kLayers; ++i) {
      layers_->push_back(EncoderBlock(kDModel, kHeads, kFfn, 1e-5));
    }
    register_module("layers", layers_);
    ln_ = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDModel})));
    head_ = register_module("head", torch::nn::Linear(kDModel, num_classes));
  }
  /// input: int64 token ids [B, tokens]
  torch::Tensor forward(torch::Tensor input) override {
    auto x = layers_->forward(embedding_->forward(input) + pos_embedding_);
    return head_->forward(ln_->forward(x).mean(1));
  }

 private:
  torch::nn::Embedding embedding_{nullptr};
  torch::Tensor pos_embedding_;
  torch::nn::Sequential layers_;
  torch::nn::LayerNorm ln_{nullptr};
  torch::nn::Linear head_{nullptr};
};

}  // namespace

std::shared_ptr<ZooModel> build_transformer(const std::vector<int64_t>& input_shape,
                                            int64_t num_classes) {
  return std::make_shared<TransformerClassifier>(input_shape.at(0), num_classes);
}

double transformer_forward_macs(const std::vector<int64_t>& input_shape, int64_t num_classes) {
  return kLayers * encoder_block_macs(input_shape.at(0), kDModel, kFfn) +
         static_cast<double>(kDModel * num_classes);
}

}  // namespace scalebench::models
