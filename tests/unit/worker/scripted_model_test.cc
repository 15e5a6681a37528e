// TorchScript models as benchmark models: modules built and saved in C++ (no Python), loaded
// back through load_scripted_model, and checked against the original jit module.
#include "worker/scripted_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/base/error.h"
#include "worker/checkpoint.h"
#include "worker/model_zoo.h"

namespace scalebench {
namespace {

/// x [B, 3] -> fc (Linear 3 -> 2, TorchScript names fc.weight / fc.bias) -> + shift, then
/// * 2 while training. `shift` is a buffer of the top module. torch.jit.script gives every
/// module a `training` attribute; a C++-built one must register it.
torch::jit::Module make_linear_module() {
  torch::manual_seed(7);
  torch::jit::Module fc("fc");
  fc.register_attribute("training", c10::BoolType::get(), true);
  fc.register_parameter("weight", torch::randn({2, 3}).requires_grad_(), /*is_buffer=*/false);
  fc.register_parameter("bias", torch::randn({2}).requires_grad_(), /*is_buffer=*/false);
  fc.define(R"(
def forward(self, x):
    return torch.matmul(x, self.weight.t()) + self.bias
)");
  torch::jit::Module top("top");
  top.register_attribute("training", c10::BoolType::get(), true);
  top.register_module("fc", fc);
  top.register_buffer("shift", torch::tensor({0.5F, -0.25F}));
  top.define(R"(
def forward(self, x):
    y = self.fc.forward(x) + self.shift
    if self.training:
        return y * 2.0
    return y
)");
  return top;
}

std::string save_bytes(const torch::jit::Module& module) {
  std::ostringstream out;
  module.save(out);
  return out.str();
}

torch::Tensor jit_forward(torch::jit::Module& module, const torch::Tensor& input) {
  return module.forward({input}).toTensor();
}

template <typename Body>
void expect_cell_error(const std::string& phase, const std::string& needle, Body&& body) {
  try {
    body();
    FAIL() << "expected CellError(" << phase << ")";
  } catch (const CellError& error) {
    EXPECT_EQ(to_string(error.phase()), phase) << error.what();
    EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
  }
}

TEST(ScriptedModel, LoadsSavedBytesAndForwardsLikeTheJitModule) {
  torch::jit::Module original = make_linear_module();
  original.eval();
  const auto model = load_scripted_model(save_bytes(original), "models/net.pt");
  model->eval();
  const torch::Tensor input = torch::randn({4, 3});
  const torch::Tensor expected = jit_forward(original, input);
  const torch::Tensor output = model->forward(input);
  EXPECT_EQ(output.sizes(), (std::vector<int64_t>{4, 2}));
  EXPECT_TRUE(torch::allclose(output, expected)) << output << expected;
  EXPECT_EQ(parameter_count(*model), 2 * 3 + 2);
}

TEST(ScriptedModel, WrapperParametersAreTheJitModulesTensors) {
  const auto model = load_scripted_model(save_bytes(make_linear_module()), "net.pt");
  model->eval();
  const auto parameters = model->named_parameters(/*recurse=*/false);
  ASSERT_EQ(parameters.size(), 2U);
  ASSERT_TRUE(parameters.contains("fc_weight"));
  ASSERT_TRUE(parameters.contains("fc_bias"));
  ASSERT_TRUE(model->named_buffers(/*recurse=*/false).contains("shift"));
  EXPECT_TRUE(model->named_parameters()["fc_weight"].requires_grad());

  const torch::Tensor input = torch::ones({1, 3});
  const torch::Tensor before = model->forward(input);
  {
    torch::NoGradGuard no_grad;
    model->named_parameters()["fc_bias"].add_(10.0);
    model->named_buffers()["shift"].fill_(0.0);
  }
  const torch::Tensor after = model->forward(input);
  const torch::Tensor shift_before = torch::tensor({0.5F, -0.25F});
  EXPECT_TRUE(torch::allclose(after, before - shift_before + 10.0)) << before << after;
}

TEST(ScriptedModel, AnOptimizerStepOnTheWrapperChangesTheJitForward) {
  const auto model = load_scripted_model(save_bytes(make_linear_module()), "net.pt");
  model->train();
  const torch::Tensor input = torch::randn({8, 3});
  const torch::Tensor targets = torch::tensor({0, 1, 0, 1, 1, 0, 0, 1}, torch::kInt64);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.5));
  const torch::Tensor loss_before = task_loss(model->forward(input), targets);
  optimizer.zero_grad();
  loss_before.backward();
  for (const auto& parameter : model->parameters()) {
    ASSERT_TRUE(parameter.grad().defined());
    EXPECT_GT(parameter.grad().abs().sum().item<double>(), 0.0);
  }
  optimizer.step();
  const torch::Tensor loss_after = task_loss(model->forward(input), targets);
  EXPECT_LT(loss_after.item<double>(), loss_before.item<double>());
}

TEST(ScriptedModel, ToDoubleConvertsTheJitModulesState) {
  const auto model = load_scripted_model(save_bytes(make_linear_module()), "net.pt");
  model->eval();
  const torch::Tensor input = torch::randn({2, 3});
  const torch::Tensor expected = model->forward(input).to(torch::kDouble);
  model->to(torch::kDouble);
  for (const auto& [name, tensor] : model->state_entries()) {
    EXPECT_EQ(tensor.scalar_type(), torch::kDouble) << name;
  }
  const torch::Tensor output = model->forward(input.to(torch::kDouble));
  EXPECT_EQ(output.scalar_type(), torch::kDouble);
  EXPECT_TRUE(torch::allclose(output, expected, 1e-5, 1e-6));
}

TEST(ScriptedModel, AFrozenParameterStaysFrozen) {
  torch::jit::Module frozen("frozen");
  frozen.register_attribute("training", c10::BoolType::get(), true);
  frozen.register_parameter("scale", torch::full({1}, 3.0), /*is_buffer=*/false);
  frozen.register_parameter("offset", torch::zeros({1}).requires_grad_(), /*is_buffer=*/false);
  frozen.define(R"(
def forward(self, x):
    return x * self.scale + self.offset
)");
  const auto model = load_scripted_model(save_bytes(frozen), "frozen.pt");
  EXPECT_FALSE(model->named_parameters()["scale"].requires_grad());
  EXPECT_TRUE(model->named_parameters()["offset"].requires_grad());
  model->forward(torch::ones({2, 1})).sum().backward();
  EXPECT_FALSE(model->named_parameters()["scale"].grad().defined());
  EXPECT_TRUE(torch::equal(model->named_parameters()["offset"].grad(), torch::full({1}, 2.0)));
}

TEST(ScriptedModel, TiedWeightsAreOneParameter) {
  // One tensor under two names (tied embedding / head weights): Python's parameters()
  // lists it once, so the optimizer steps it once and parameter_count counts it once;
  // state_dict (and so state_entries) keeps both names.
  torch::jit::Module tied("tied");
  tied.register_attribute("training", c10::BoolType::get(), true);
  const torch::Tensor shared = torch::ones({2, 2}).requires_grad_();
  tied.register_parameter("encoder_weight", shared, /*is_buffer=*/false);
  tied.register_parameter("decoder_weight", shared, /*is_buffer=*/false);
  tied.define(R"(
def forward(self, x):
    return torch.matmul(torch.matmul(x, self.encoder_weight), self.decoder_weight.t())
)");
  const auto model = load_scripted_model(save_bytes(tied), "tied.pt");
  EXPECT_EQ(model->parameters().size(), 1U);
  EXPECT_EQ(parameter_count(*model), 4);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : model->state_entries()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"encoder_weight", "decoder_weight"}));
  EXPECT_EQ(model->state_entries()[0].second.data_ptr(),
            model->state_entries()[1].second.data_ptr());
}

TEST(ScriptedModel, StateEntriesUseTorchScriptNames) {
  const auto model = load_scripted_model(save_bytes(make_linear_module()), "net.pt");
  std::vector<std::string> names;
  for (const auto& [name, tensor] : model->state_entries()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc.weight", "fc.bias", "shift"}));
  // Same storage as the nn::Module registration.
  const auto entries = model->state_entries();
  EXPECT_EQ(entries[0].second.data_ptr(), model->named_parameters()["fc_weight"].data_ptr());
  EXPECT_EQ(entries[2].second.data_ptr(), model->named_buffers()["shift"].data_ptr());
}

TEST(ScriptedModel, TrainAndEvalReachTheJitModule) {
  const auto model = load_scripted_model(save_bytes(make_linear_module()), "net.pt");
  const torch::Tensor input = torch::randn({3, 3});
  model->eval();
  EXPECT_FALSE(model->is_training());
  const torch::Tensor evaluated = model->forward(input);
  model->train();
  EXPECT_TRUE(model->is_training());
  EXPECT_TRUE(torch::allclose(model->forward(input), evaluated * 2.0));
  model->train(false);
  EXPECT_TRUE(torch::allclose(model->forward(input), evaluated));
}

TEST(ScriptedModel, GarbageOrEmptyBytesFailInModelInit) {
  expect_cell_error("model_init", "models/bad.pt",
                    [] { load_scripted_model("not a zip archive at all", "models/bad.pt"); });
  expect_cell_error("model_init", "models/empty.pt",
                    [] { load_scripted_model("", "models/empty.pt"); });
  // A truncated archive is not one either.
  const std::string bytes = save_bytes(make_linear_module());
  expect_cell_error("model_init", "cut.pt",
                    [&] { load_scripted_model(bytes.substr(0, bytes.size() / 2), "cut.pt"); });
}

TEST(ScriptedModel, ATupleOutputFailsInForward) {
  torch::jit::Module pair("pair");
  pair.register_attribute("training", c10::BoolType::get(), true);
  pair.define(R"(
def forward(self, x):
    return (x, x + 1.0)
)");
  const auto model = load_scripted_model(save_bytes(pair), "pair.pt");
  expect_cell_error("forward", "pair.pt", [&] { model->forward(torch::zeros({1, 2})); });
}

TEST(ScriptedModel, InfoBuildsTheArtifactAndMakesClassSamples) {
  CellSpec cell;
  cell.model.torchscript = "models/net.pt";
  cell.input_shape = {3};
  cell.num_classes = 2;
  const ModelInfo info = scripted_model_info(cell, save_bytes(make_linear_module()));
  EXPECT_EQ(info.name, "torchscript:models/net.pt");
  EXPECT_EQ(info.default_input_shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(info.default_num_classes, 2);
  EXPECT_FALSE(info.forward_flops_per_sample);
  EXPECT_NO_THROW(info.check({3}, 2));
  EXPECT_THROW(info.check({}, 2), InputError);
  EXPECT_THROW(info.check({3}, 0), InputError);
  const auto model = info.build({3}, 2);
  ASSERT_TRUE(model);
  EXPECT_EQ(parameter_count(*model), 8);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(3);
  torch::Tensor input = torch::empty({3});
  torch::Tensor target = torch::empty({}, torch::kInt64);
  info.make_sample(input, target, 2, generator);
  EXPECT_GE(target.item<int64_t>(), 0);
  EXPECT_LT(target.item<int64_t>(), 2);
}

TEST(ScriptedModel, CheckpointLoadsByTorchScriptNames) {
  const auto model = load_scripted_model(save_bytes(make_linear_module()), "net.pt");
  model->eval();
  c10::Dict<std::string, torch::Tensor> state;
  state.insert("fc.weight", torch::full({2, 3}, 0.5));
  state.insert("fc.bias", torch::tensor({1.0, -1.0}, torch::kDouble));  // converted to float
  state.insert("shift", torch::zeros({2}));
  const auto path = std::filesystem::temp_directory_path() /
                    ("scalebench_scripted_checkpoint_" + std::to_string(::getpid()) + ".pt");
  const auto bytes = torch::pickle_save(state);
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));

  load_state_dict(model->state_entries(), path.string());
  const torch::Tensor output = model->forward(torch::ones({1, 3}));
  EXPECT_TRUE(torch::allclose(output, torch::tensor({{2.5F, 0.5F}}))) << output;
  EXPECT_EQ(model->named_parameters()["fc_bias"].scalar_type(), torch::kFloat32);

  // The nn names ("fc_weight") are not what a TorchScript checkpoint holds.
  expect_cell_error("checkpoint_load", "fc_weight",
                    [&] { load_state_dict(models::named_state(*model), path.string()); });
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace scalebench
