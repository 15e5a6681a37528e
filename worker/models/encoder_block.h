// Pre-norm transformer encoder block shared by vit_b16 and transformer.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace scalebench::models {

/// x + Attention(LN(x)), then x + MLP(LN(x)); MLP = Linear -> GELU -> Linear.
/// Attention uses at::scaled_dot_product_attention (fused kernels on GPU). Parameters:
/// the same count as torch.nn.MultiheadAttention (in-projection 3 x dim, out-projection).
class EncoderBlockImpl : public torch::nn::Module {
 public:
  EncoderBlockImpl(int64_t dim, int64_t heads, int64_t mlp_dim, double layer_norm_eps);
  /// input [B, N, dim] -> [B, N, dim]
  torch::Tensor forward(const torch::Tensor& input);

 private:
  int64_t heads_;
  torch::nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  torch::nn::Linear qkv_{nullptr}, out_proj_{nullptr}, fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(EncoderBlock);

/// MACs of one block for `tokens` tokens: projections, Q K^T, A V and the MLP.
double encoder_block_macs(int64_t tokens, int64_t dim, int64_t mlp_dim);

}  // namespace scalebench::models
