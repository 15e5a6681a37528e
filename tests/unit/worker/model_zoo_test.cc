// Zoo models: parameter counts equal torchvision's, output shapes, analytic FLOPs, errors.
#include "worker/model_zoo.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/base/error.h"
#include "common/cell/zoo_names.h"

namespace scalebench {
namespace {

int64_t built_parameters(const std::string& name) {
  const ModelInfo& info = find_model(name);
  auto model = info.build(info.default_input_shape, info.default_num_classes);
  return parameter_count(*model);
}

TEST(ModelZoo, ParameterCountsMatchTorchvision) {
  EXPECT_EQ(built_parameters("resnet18"), 11'689'512);
  EXPECT_EQ(built_parameters("resnet50"), 25'557'032);
  EXPECT_EQ(built_parameters("vit_b16"), 86'567'656);
  EXPECT_EQ(built_parameters("mlp"), 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10);
}

struct ShapeCase {
  std::string name;
  std::vector<int64_t> input_shape;      // empty = default
  int64_t classes;                       // 0 = default
  std::vector<int64_t> expected_output;  // with batch 2
};

TEST(ModelZoo, OutputShapes) {
  const std::vector<ShapeCase> cases = {
      {"mlp", {}, 0, {2, 10}},
      {"resnet18", {3, 32, 48}, 7, {2, 7}},
      {"resnet50", {3, 64, 64}, 0, {2, 1000}},
      {"vit_b16", {3, 32, 64}, 5, {2, 5}},
      {"unet3d", {1, 16, 16, 24}, 0, {2, 2, 16, 16, 24}},
      {"transformer", {16}, 0, {2, 2}},
  };
  torch::NoGradGuard no_grad;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const ModelInfo& info = find_model(c.name);
    const auto shape = c.input_shape.empty() ? info.default_input_shape : c.input_shape;
    const int64_t classes = c.classes == 0 ? info.default_num_classes : c.classes;
    info.check(shape, classes);
    auto model = info.build(shape, classes);
    model->eval();
    std::vector<int64_t> batch_shape = {2};
    batch_shape.insert(batch_shape.end(), shape.begin(), shape.end());
    auto input = torch::zeros(batch_shape, torch::TensorOptions().dtype(info.input_dtype));
    auto target = torch::zeros({}, torch::kInt64);
    auto generator = at::make_generator<at::CPUGeneratorImpl>(1);
    info.make_sample(input[0], torch::zeros(target_shape(info, shape), torch::kInt64), classes,
                     generator);
    const auto output = model->forward(input);
    EXPECT_EQ(output.sizes().vec(), c.expected_output);
  }
}

TEST(ModelZoo, Resnet50FlopsAt224AreAbout8Point2Giga) {
  const ModelInfo& info = find_model("resnet50");
  const double flops = info.forward_flops_per_sample({3, 224, 224}, 1000);
  EXPECT_NEAR(flops, 8.2e9, 0.05 * 8.2e9);
}

TEST(ModelZoo, KnownFlopsOfOtherModels) {
  // ResNet-18: 1.82 GMAC; ViT-B/16: 17.6 GMAC (published figures, fvcore/ptflops).
  EXPECT_NEAR(find_model("resnet18").forward_flops_per_sample({3, 224, 224}, 1000), 3.64e9,
              0.05 * 3.64e9);
  EXPECT_NEAR(find_model("vit_b16").forward_flops_per_sample({3, 224, 224}, 1000), 35.1e9,
              0.05 * 35.1e9);
  EXPECT_DOUBLE_EQ(find_model("mlp").forward_flops_per_sample({784}, 10),
                   2.0 * (784 * 512 + 512 * 512 + 512 * 10));
  // Every unet3d layer scales with the voxel count: 8x the voxels, 8x the FLOPs.
  const auto& unet = find_model("unet3d");
  EXPECT_NEAR(unet.forward_flops_per_sample({1, 64, 64, 64}, 2) /
                  unet.forward_flops_per_sample({1, 32, 32, 32}, 2),
              8.0, 1e-9);
}

TEST(ModelZoo, RejectsUnknownNamesAndBadShapes) {
  EXPECT_THROW(find_model("resnet101"), InputError);
  EXPECT_THROW(find_model("resnet18").check({3, 16, 16}, 10), InputError);
  EXPECT_THROW(find_model("vit_b16").check({3, 224, 200}, 10), InputError);
  EXPECT_THROW(find_model("unet3d").check({1, 64, 64, 60}, 2), InputError);
  EXPECT_THROW(find_model("mlp").check({784}, 0), InputError);
  EXPECT_NO_THROW(find_model("transformer").check({128}, 2));
  EXPECT_EQ(model_names().size(), 6u);
}

TEST(ModelZoo, AgreesWithTheFrontEndsTable) {
  ASSERT_EQ(model_names().size(), zoo_models().size());
  for (const auto& entry : zoo_models()) {
    SCOPED_TRACE(entry.name);
    const ModelInfo& info = find_model(entry.name);
    EXPECT_EQ(info.default_input_shape, entry.default_shape);
    EXPECT_EQ(info.default_num_classes, entry.default_classes);
    EXPECT_NO_THROW(info.check(entry.default_shape, entry.default_classes));
  }
}

}  // namespace
}  // namespace scalebench
