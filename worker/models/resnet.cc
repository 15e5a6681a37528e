// torchvision's ResNet (BasicBlock for 18, Bottleneck for 50) with torchvision's module
// names, so the parameter count and layout match `torchvision.models.resnet*`.
#include <array>
#include <stdexcept>

#include "worker/models/zoo_model.h"

namespace scalebench::models {
namespace {

struct Architecture {
  bool bottleneck;
  std::array<int64_t, 4> blocks;
};

Architecture architecture(int depth) {
  if (depth == 18) return {false, {2, 2, 2, 2}};
  if (depth == 50) return {true, {3, 4, 6, 3}};
  throw std::invalid_argument("resnet depth must be 18 or 50");
}

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

/// BasicBlock (two 3x3) or Bottleneck (1x1, 3x3 with the stride, 1x1 x4).
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(bool bottleneck, int64_t in, int64_t planes, int64_t stride) {
    const int64_t out = bottleneck ? planes * 4 : planes;
    if (bottleneck) {
      add_conv(1, in, planes, 1, 1);
      add_conv(2, planes, planes, 3, stride);
      add_conv(3, planes, out, 1, 1);
    } else {
      add_conv(1, in, planes, 3, stride);
      add_conv(2, planes, out, 3, 1);
    }
    if (stride != 1 || in != out) {
      downsample_ = register_module(
          "downsample",
          torch::nn::Sequential(conv(in, out, 1, stride), torch::nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(const torch::Tensor& input) {
    auto x = input;
    for (size_t i = 0; i < convs_.size(); ++i) {
      x = norms_[i]->forward(convs_[i]->forward(x));
      if (i + 1 < convs_.size()) x = torch::relu(x);
    }
    auto identity = downsample_ ? downsample_->forward(input) : input;
    return torch::relu(x + identity);
  }

 private:
  void add_conv(int index, int64_t in, int64_t out, int64_t kernel, int64_t stride) {
    const auto suffix = std::to_string(index);
    convs_.push_back(register_module("conv" + suffix, conv(in, out, kernel, stride)));
    norms_.push_back(register_module("bn" + suffix, torch::nn::BatchNorm2d(out)));
  }
  std::vector<torch::nn::Conv2d> convs_;
  std::vector<torch::nn::BatchNorm2d> norms_;
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(Block);

class ResNet : public ZooModel {
 public:
  ResNet(const Architecture& arch, int64_t in_channels, int64_t num_classes) {
    conv1_ = register_module("conv1", conv(in_channels, 64, 7, 2));
    bn1_ = register_module("bn1", torch::nn::BatchNorm2d(64));
    int64_t in = 64;
    for (size_t stage = 0; stage < 4; ++stage) {
      const int64_t planes = 64LL << stage;
      torch::nn::Sequential layer;
      for (int64_t b = 0; b < arch.blocks[stage]; ++b) {
        const int64_t stride = (b == 0 && stage > 0) ? 2 : 1;
        layer->push_back(Block(arch.bottleneck, in, planes, stride));
        in = arch.bottleneck ? planes * 4 : planes;
      }
      layers_.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    fc_ = register_module("fc", torch::nn::Linear(in, num_classes));
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<torch::nn::Conv2d>()) {
        torch::nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
      }
    }
  }
  torch::Tensor forward(torch::Tensor input) override {
    auto x = torch::relu(bn1_->forward(conv1_->forward(input)));
    x = torch::max_pool2d(x, 3, 2, 1);
    for (auto& layer : layers_) x = layer->forward(x);
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc_->forward(x);
  }

 private:
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  std::vector<torch::nn::Sequential> layers_;
  torch::nn::Linear fc_{nullptr};
};

}  // namespace

std::shared_ptr<ZooModel> build_resnet(int depth, const std::vector<int64_t>& input_shape,
                                       int64_t num_classes) {
  // Adaptive average pooling: any H, W >= 32.
  return std::make_shared<ResNet>(architecture(depth), input_shape.at(0), num_classes);
}

double resnet_forward_macs(int depth, const std::vector<int64_t>& input_shape,
                           int64_t num_classes) {
  const Architecture arch = architecture(depth);
  int64_t h = conv_out(input_shape.at(1), 7, 2, 3);
  int64_t w = conv_out(input_shape.at(2), 7, 2, 3);
  double macs = 64.0 * 49 * static_cast<double>(input_shape.at(0) * h * w);
  h = conv_out(h, 3, 2, 1);
  w = conv_out(w, 3, 2, 1);
  int64_t in = 64;
  for (size_t stage = 0; stage < 4; ++stage) {
    const int64_t planes = 64LL << stage;
    const int64_t out = arch.bottleneck ? planes * 4 : planes;
    for (int64_t b = 0; b < arch.blocks[stage]; ++b) {
      const int64_t stride = (b == 0 && stage > 0) ? 2 : 1;
      const int64_t ho = conv_out(h, 3, stride, 1);
      const int64_t wo = conv_out(w, 3, stride, 1);
      const double in_area = static_cast<double>(h * w);
      const double out_area = static_cast<double>(ho * wo);
      if (arch.bottleneck) {
        macs += static_cast<double>(in * planes) * in_area;
        macs += static_cast<double>(planes * planes * 9) * out_area;
        macs += static_cast<double>(planes * out) * out_area;
      } else {
        macs += static_cast<double>(in * planes * 9) * out_area;
        macs += static_cast<double>(planes * out * 9) * out_area;
      }
      if (stride != 1 || in != out) {
        macs += static_cast<double>(in * out) *
                static_cast<double>(conv_out(h, 1, stride, 0) * conv_out(w, 1, stride, 0));
      }
      h = ho;
      w = wo;
      in = out;
    }
  }
  return macs + static_cast<double>(in * num_classes);
}

}  // namespace scalebench::models
