// Losses and their targets (Note [Targets]): the loss names, task_loss against Torch's own
// functions, the targets a cell gets, synthetic float targets, and every loss fitting a
// fixed synthetic batch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "common/base/error.h"
#include "worker/batch_source.h"
#include "worker/model_zoo.h"
#include "worker/synthetic_data.h"

namespace scalebench {
namespace {

namespace F = torch::nn::functional;

const std::vector<std::string>& loss_names() {
  static const std::vector<std::string> names = {"auto", "cross_entropy", "mse",
                                                 "l1",   "smooth_l1",     "bce_with_logits"};
  return names;
}

TEST(Losses, NamesParseAndAutoIsCrossEntropy) {
  const std::vector<std::pair<std::string, Loss>> cases = {
      {"auto", Loss::kCrossEntropy},
      {"cross_entropy", Loss::kCrossEntropy},
      {"mse", Loss::kMse},
      {"l1", Loss::kL1},
      {"smooth_l1", Loss::kSmoothL1},
      {"bce_with_logits", Loss::kBceWithLogits}};
  for (const auto& [name, loss] : cases) {
    EXPECT_EQ(parse_loss(name), loss) << name;
    EXPECT_EQ(has_float_targets(loss), loss != Loss::kCrossEntropy) << name;
  }
  try {
    parse_loss("hinge");
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("hinge"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("bce_with_logits"), std::string::npos);
  }
}

TEST(Losses, TaskLossIsTorchsLossInFloat32) {
  torch::manual_seed(1);
  const auto logits = torch::randn({4, 3, 2}).to(torch::kBFloat16);
  const auto values = torch::randn({4, 3, 2});
  const auto unit = torch::rand({4, 3, 2});
  const auto labels = torch::randint(0, 3, {4, 2}, torch::kInt64);
  const auto output = logits.to(torch::kFloat32);
  struct Case {
    Loss loss;
    torch::Tensor targets;
    torch::Tensor expected;
  };
  const std::vector<Case> cases = {
      {Loss::kCrossEntropy, labels, F::cross_entropy(output, labels)},
      {Loss::kMse, values, F::mse_loss(output, values)},
      {Loss::kL1, values, F::l1_loss(output, values)},
      {Loss::kSmoothL1, values, F::smooth_l1_loss(output, values)},
      {Loss::kBceWithLogits, unit, F::binary_cross_entropy_with_logits(output, unit)},
  };
  for (const auto& c : cases) {
    const auto loss = task_loss(logits, c.targets, c.loss);
    EXPECT_EQ(loss.scalar_type(), torch::kFloat32);
    EXPECT_EQ(loss.dim(), 0);
    EXPECT_TRUE(torch::equal(loss, c.expected)) << static_cast<int>(c.loss);
  }
  // The default is cross entropy: the rule of every cell before `loss`.
  EXPECT_TRUE(torch::equal(task_loss(logits, labels), F::cross_entropy(output, labels)));
}

TEST(Losses, FloatTargetsOfAnotherShapeAreRefusedNotBroadcast) {
  const auto logits = torch::zeros({4, 3});
  try {
    task_loss(logits, torch::zeros({4, 1}), Loss::kMse);
    FAIL() << "expected CellError";
  } catch (const CellError& error) {
    EXPECT_EQ(error.phase(), FailurePhase::kForward);
    EXPECT_NE(std::string(error.what()).find("[4, 3]"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("[4, 1]"), std::string::npos) << error.what();
  }
}

CellSpec zoo_cell(const std::string& model, const std::string& loss, Mode mode = Mode::kTrain) {
  CellSpec cell;
  cell.model.zoo = model;
  cell.loss = loss;
  cell.mode = mode;
  return cell;
}

TEST(Losses, CellTargetsFollowTheLoss) {
  using Kind = TargetSpec::Kind;
  const ModelInfo& mlp = find_model("mlp");
  const ModelInfo& unet = find_model("unet3d");
  for (const std::string loss : {"auto", "cross_entropy"}) {
    const TargetSpec classes = cell_targets(zoo_cell("mlp", loss), mlp, {8}, 4, {});
    EXPECT_EQ(classes.kind, Kind::kClassIds);
    EXPECT_EQ(classes.shape, std::vector<int64_t>{});
    EXPECT_EQ(classes.num_classes, 4);
    EXPECT_TRUE(classes.used);
    const TargetSpec voxels = cell_targets(zoo_cell("unet3d", loss), unet, {1, 8, 8, 8}, 2, {});
    EXPECT_EQ(voxels.shape, (std::vector<int64_t>{8, 8, 8}));
  }
  const std::vector<int64_t> output = {2, 8, 8, 8};
  const TargetSpec regression =
      cell_targets(zoo_cell("unet3d", "mse"), unet, {1, 8, 8, 8}, 2, output);
  EXPECT_EQ(regression.kind, Kind::kValues);
  EXPECT_EQ(regression.shape, output);
  EXPECT_EQ(regression.loss, "mse");
  EXPECT_EQ(cell_targets(zoo_cell("mlp", "bce_with_logits"), mlp, {8}, 4, {4}).kind,
            Kind::kUnitValues);
  // TorchScript class targets: whatever shape the file holds.
  CellSpec scripted = zoo_cell("", "auto");
  scripted.model.torchscript = "model.pt";
  EXPECT_FALSE(cell_targets(scripted, mlp, {8}, 4, {}).shape.has_value());
  // Inference reads no targets, whatever the cell says.
  const TargetSpec inference = cell_targets(zoo_cell("mlp", "mse", Mode::kInfer), mlp, {8}, 4, {});
  EXPECT_FALSE(inference.used);
  EXPECT_EQ(inference.kind, Kind::kClassIds);
  EXPECT_THROW(cell_targets(zoo_cell("mlp", "hinge"), mlp, {8}, 4, {}), InputError);
}

TEST(Losses, SyntheticFloatTargetsAreSeededShapedAndLeaveInputsAlone) {
  const ModelInfo& unet = find_model("unet3d");
  const std::vector<int64_t> shape = {1, 8, 8, 8};
  const SyntheticData classes(unet, shape, 2, 7, false);
  for (const auto kind : {TargetSpec::Kind::kValues, TargetSpec::Kind::kUnitValues}) {
    const SyntheticData values(
        unet, shape, TargetSpec{.kind = kind, .shape = std::vector<int64_t>{2, 8, 8, 8}}, 7, false);
    const HostBatch whole = values.make_batch({0, 4});
    const HostBatch part = values.make_batch({2, 2});
    EXPECT_EQ(whole.targets.scalar_type(), torch::kFloat32);
    EXPECT_EQ(whole.targets.sizes().vec(), (std::vector<int64_t>{4, 2, 8, 8, 8}));
    EXPECT_TRUE(torch::equal(whole.targets.slice(0, 2, 4), part.targets));
    EXPECT_TRUE(torch::equal(whole.inputs, classes.make_batch({0, 4}).inputs));
    EXPECT_FALSE(torch::equal(whole.targets[0], whole.targets[1]));
    if (kind == TargetSpec::Kind::kUnitValues) {
      EXPECT_GE(whole.targets.min().item<float>(), 0.0F);
      EXPECT_LE(whole.targets.max().item<float>(), 1.0F);
    } else {
      EXPECT_LT(whole.targets.min().item<float>(), 0.0F);  // N(0, 1): both signs
      EXPECT_NEAR(whole.targets.mean().item<float>(), 0.0F, 0.05F);
    }
  }
}

/// Loss of a fixed synthetic batch before and after 10 SGD steps of a small MLP.
std::pair<double, double> fit_fixed_batch(const std::string& loss_name) {
  const ModelInfo& mlp = find_model("mlp");
  torch::manual_seed(0);
  auto model = mlp.build({16}, 4);
  model->train();
  const std::vector<int64_t> output = {4};
  const TargetSpec targets = cell_targets(zoo_cell("mlp", loss_name), mlp, {16}, 4, output);
  const HostBatch batch = SyntheticData(mlp, {16}, targets, 3, false).make_batch({0, 32});
  const Loss loss = parse_loss(loss_name);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  double first = NAN, last = NAN;
  for (int step = 0; step < 10; ++step) {
    const auto value = task_loss(model->forward(batch.inputs), batch.targets, loss);
    value.backward();
    optimizer.step();
    optimizer.zero_grad();
    (step == 0 ? first : last) = value.item<double>();
  }
  return {first, last};
}

TEST(Losses, EveryLossFitsAFixedSyntheticBatch) {
  for (const auto& name : loss_names()) {
    SCOPED_TRACE(name);
    const auto [first, last] = fit_fixed_batch(name);
    EXPECT_TRUE(std::isfinite(first));
    EXPECT_TRUE(std::isfinite(last));
    EXPECT_LT(last, first);
  }
}

}  // namespace
}  // namespace scalebench
