// The replay layer table (Note [Replay workload]): parsing, refusals and the backward
// schedule, table-driven.
#include "common/cell/replay_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/cell/bucket_assignment.h"

namespace scalebench {
namespace {

constexpr const char* kThreeLayers = R"({
  "model": "toy", "source": "written by hand", "optimizer_s": 0.004, "data_s": 0.001,
  "jitter": 0.02,
  "layers": [
    {"name": "stem", "forward_s": 0.001, "backward_s": 0.002, "parameters": [10, 2]},
    {"name": "relu", "forward_s": 0.0005, "backward_s": 0.0005},
    {"name": "head", "forward_s": 0.003, "backward_s": 0.006, "parameters": [100]}
  ]
})";

TEST(ReplayTable, ParsesEveryField) {
  const ReplayTable table = parse_replay_table(kThreeLayers, "toy.json");
  EXPECT_EQ(table.model, "toy");
  EXPECT_EQ(table.source, "written by hand");
  EXPECT_EQ(table.element_bytes, 4);
  EXPECT_DOUBLE_EQ(table.optimizer_s, 0.004);
  EXPECT_DOUBLE_EQ(table.data_s, 0.001);
  EXPECT_DOUBLE_EQ(table.jitter, 0.02);
  ASSERT_EQ(table.layers.size(), 3u);
  EXPECT_EQ(table.layers[1].name, "relu");
  EXPECT_TRUE(table.layers[1].parameter_elements.empty());
  EXPECT_EQ(table.parameter_bytes(), (std::vector<int64_t>{40, 8, 400}));
  EXPECT_DOUBLE_EQ(table.forward_s(), 0.0045);
  EXPECT_DOUBLE_EQ(table.backward_s(), 0.0085);
}

TEST(ReplayTable, BackwardReadiesTheLastLayersParametersFirst) {
  const ReplayTable table = parse_replay_table(kThreeLayers, "toy.json");
  const std::vector<std::vector<size_t>> expected = {{2}, {}, {0, 1}};
  EXPECT_EQ(backward_ready_parameters(table), expected);
}

TEST(ReplayTable, BucketsOfTheReplayedParametersAreDdps) {
  // The workload hands parameter_bytes() to the reducer's assignment: head alone in the
  // first bucket (cap 64 B), the stem's two parameters together after it.
  const ReplayTable table = parse_replay_table(kThreeLayers, "toy.json");
  const std::vector<std::vector<size_t>> expected = {{2}, {0, 1}};
  EXPECT_EQ(compute_bucket_assignment_by_size(table.parameter_bytes(), 64, 1024), expected);
}

TEST(ReplayTable, SixteenBitGradients) {
  const ReplayTable table = parse_replay_table(
      R"({"element_bytes": 2, "layers": [{"forward_s": 0, "backward_s": 0, "parameters": [3]}]})",
      "x.json");
  EXPECT_EQ(table.parameter_bytes(), (std::vector<int64_t>{6}));
}

struct Refusal {
  std::string name;
  std::string json;
  std::string says;
};

class ReplayTableRefuses : public testing::TestWithParam<Refusal> {};

TEST_P(ReplayTableRefuses, NamesTheProblem) {
  const Refusal& refusal = GetParam();
  try {
    (void)parse_replay_table(refusal.json, "bad.json");
    FAIL() << "accepted " << refusal.json;
  } catch (const InputError& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("bad.json"), std::string::npos) << text;
    EXPECT_NE(text.find(refusal.says), std::string::npos) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, ReplayTableRefuses,
    testing::Values(
        Refusal{"not_json", "{", "not JSON"}, Refusal{"not_object", "[1]", "one JSON object"},
        Refusal{"no_layers", R"({"layers": []})", "non-empty list"},
        Refusal{"missing_backward", R"({"layers": [{"forward_s": 1, "parameters": [1]}]})",
                "layers[0].backward_s is missing"},
        Refusal{"negative_time",
                R"({"layers": [{"forward_s": -1, "backward_s": 0, "parameters": [1]}]})",
                "layers[0].forward_s must be seconds >= 0"},
        Refusal{"zero_parameter",
                R"({"layers": [{"forward_s": 0, "backward_s": 0, "parameters": [0]}]})",
                "element counts >= 1"},
        Refusal{"no_parameters", R"({"layers": [{"forward_s": 0, "backward_s": 0}]})",
                "no layer has parameters"},
        Refusal{"element_bytes",
                R"({"element_bytes": 8, "layers": [{"forward_s": 0, "backward_s": 0,
                    "parameters": [1]}]})",
                "element_bytes must be 4"},
        Refusal{"jitter",
                R"({"jitter": 0.9, "layers": [{"forward_s": 0, "backward_s": 0,
                    "parameters": [1]}]})",
                "jitter must be within"}),
    [](const testing::TestParamInfo<Refusal>& info) { return info.param.name; });

}  // namespace
}  // namespace scalebench
