#include "worker/models/zoo_model.h"

namespace scalebench::models {
namespace {

constexpr int64_t kHidden = 512;

class Mlp : public ZooModel {
 public:
  Mlp(int64_t in_features, int64_t num_classes) {
    fc1_ = register_module("fc1", torch::nn::Linear(in_features, kHidden));
    fc2_ = register_module("fc2", torch::nn::Linear(kHidden, kHidden));
    fc3_ = register_module("fc3", torch::nn::Linear(kHidden, num_classes));
  }
  torch::Tensor forward(torch::Tensor input) override {
    auto x = input.flatten(1);
    x = torch::relu(fc1_->forward(x));
    x = torch::relu(fc2_->forward(x));
    return fc3_->forward(x);
  }

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
};

}  // namespace

int64_t product(const std::vector<int64_t>& shape) {
  int64_t result = 1;
  for (int64_t extent : shape) result *= extent;
  return result;
}

std::shared_ptr<ZooModel> build_mlp(const std::vector<int64_t>& input_shape, int64_t num_classes) {
  return std::make_shared<Mlp>(product(input_shape), num_classes);
}

double mlp_forward_macs(const std::vector<int64_t>& input_shape, int64_t num_classes) {
  const double in = static_cast<double>(product(input_shape));
  return in * kHidden + kHidden * kHidden + static_cast<double>(kHidden * num_classes);
}

}  // namespace scalebench::models
