// 3D U-Net (Cicek et al. 2016 layout at base width 16): encoder levels of 16, 32, 64
// channels, a 128-channel bottleneck at 1/8 resolution, transposed-conv upsampling with
// skip concatenation, 1x1x1 head. D, H, W must be divisible by 8.
#include <array>

#include "worker/models/zoo_model.h"

namespace scalebench::models {
namespace {

constexpr int64_t kBase = 16;
constexpr int kLevels = 3;

torch::nn::Sequential double_conv(int64_t in, int64_t out) {
  auto conv = [](int64_t a, int64_t b) {
    return torch::nn::Conv3d(torch::nn::Conv3dOptions(a, b, 3).padding(1).bias(false));
  };
  return torch::nn::Sequential(conv(in, out), torch::nn::BatchNorm3d(out), torch::nn::ReLU(),
                               conv(out, out), torch::nn::BatchNorm3d(out), torch::nn::ReLU());
}

class UNet3d : public ZooModel {
 public:
  UNet3d(int64_t in_channels, int64_t num_classes) {
    int64_t channels = in_channels;
    for (int level = 0; level < kLevels; ++level) {
      const int64_t width = kBase << level;
      down_[level] = register_module("down" + std::to_string(level), double_conv(channels, width));
      channels = width;
    }
    bottleneck_ = register_module("bottleneck", double_conv(channels, kBase << kLevels));
    for (int level = kLevels - 1; level >= 0; --level) {
      const int64_t width = kBase << level;
      const auto name = std::to_string(level);
      upsample_[level] = register_module(
          "upsample" + name, torch::nn::ConvTranspose3d(
                                 torch::nn::ConvTranspose3dOptions(width * 2, width, 2).stride(2)));
      up_[level] = register_module("up" + name, double_conv(width * 2, width));
    }
    head_ =
        register_module("head", torch::nn::Conv3d(torch::nn::Conv3dOptions(kBase, num_classes, 1)));
  }
  torch::Tensor forward(torch::Tensor input) override {
    std::array<torch::Tensor, kLevels> skips;
    auto x = input;
    for (int level = 0; level < kLevels; ++level) {
      skips[level] = down_[level]->forward(x);
      x = torch::max_pool3d(skips[level], 2);
    }
    x = bottleneck_->forward(x);
    for (int level = kLevels - 1; level >= 0; --level) {
      x = upsample_[level]->forward(x);
      x = up_[level]->forward(torch::cat({skips[level], x}, 1));
    }
    return head_->forward(x);
  }

 private:
  std::array<torch::nn::Sequential, kLevels> down_, up_;
  torch::nn::Sequential bottleneck_{nullptr};
  std::array<torch::nn::ConvTranspose3d, kLevels> upsample_{nullptr, nullptr, nullptr};
  torch::nn::Conv3d head_{nullptr};
};

}  // namespace

std::shared_ptr<ZooModel> build_unet3d(const std::vector<int64_t>& input_shape,
                                       int64_t num_classes) {
  return std::make_shared<UNet3d>(input_shape.at(0), num_classes);
}

double unet3d_forward_macs(const std::vector<int64_t>& input_shape, int64_t num_classes) {
  const double voxels =
      static_cast<double>(input_shape.at(1) * input_shape.at(2) * input_shape.at(3));
  auto double_conv_macs = [](int64_t in, int64_t out, double v) {
    return static_cast<double>(27 * (in * out + out * out)) * v;
  };
  double macs = 0.0;
  int64_t channels = input_shape.at(0);
  for (int level = 0; level < kLevels; ++level) {
    const double level_voxels = voxels / static_cast<double>(1LL << (3 * level));
    const int64_t width = kBase << level;
    macs += double_conv_macs(channels, width, level_voxels);  // encoder
    // decoder at this level: transposed conv from the coarser level, then double conv
    macs += static_cast<double>(width * 2 * width * 8) * (level_voxels / 8.0);
    macs += double_conv_macs(width * 2, width, level_voxels);
    channels = width;
  }
  macs += double_conv_macs(channels, kBase << kLevels,
                           voxels / static_cast<double>(1 << (3 * kLevels)));
  return macs + static_cast<double>(kBase * num_classes) * voxels;
}

}  // namespace scalebench::models
