#include "worker/models/encoder_block.h"

namespace scalebench::models {

EncoderBlockImpl::EncoderBlockImpl(int64_t dim, int64_t heads, int64_t mlp_dim,
                                   double layer_norm_eps)
    : heads_(heads) {
  ln_1_ = register_module(
      "ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(layer_norm_eps)));
  qkv_ = register_module("qkv", torch::nn::Linear(dim, 3 * dim));
  out_proj_ = register_module("out_proj", torch::nn::Linear(dim, dim));
  ln_2_ = register_module(
      "ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(layer_norm_eps)));
  fc1_ = register_module("fc1", torch::nn::Linear(dim, mlp_dim));
  fc2_ = register_module("fc2", torch::nn::Linear(mlp_dim, dim));
}

torch::Tensor EncoderBlockImpl::forward(const torch::Tensor& input) {
  const int64_t batch = input.size(0);
  const int64_t tokens = input.size(1);
  const int64_t dim = input.size(2);
  // [B, N, 3, heads, head_dim] -> 3 x [B, heads, N, head_dim]
  auto qkv = qkv_->forward(ln_1_->forward(input))
                 .reshape({batch, tokens, 3, heads_, dim / heads_})
                 .permute({2, 0, 3, 1, 4});
  auto attended = at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2]);
  attended = attended.transpose(1, 2).reshape({batch, tokens, dim});
  auto x = input + out_proj_->forward(attended);
  return x + fc2_->forward(torch::gelu(fc1_->forward(ln_2_->forward(x))));
}

double encoder_block_macs(int64_t tokens, int64_t dim, int64_t mlp_dim) {
  const double n = static_cast<double>(tokens);
  const double d = static_cast<double>(dim);
  const double projections = n * d * 3 * d + n * d * d;  // qkv + out_proj
  const double attention = 2 * n * n * d;                // Q K^T and A V over all heads
  const double mlp = 2 * n * d * static_cast<double>(mlp_dim);
  return projections + attention + mlp;
}

}  // namespace scalebench::models
