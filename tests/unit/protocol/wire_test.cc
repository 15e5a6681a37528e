// The wire contract (protocol/wire.h): every message round-trips through its MessagePack form
// with each field it carries (the hello, the progress, a rank's result with its phases,
// reasons, accuracy, failure, operator table and validation outputs), and a message missing
// a field is refused with what is wrong.
#include "protocol/wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/base/error.h"
#include "common/cell/accuracy.h"

namespace scalebench {
namespace {

TEST(WorkerHelloMessage, RoundTripsEveryField) {
  WorkerHello hello;
  hello.world_rank = 3;
  hello.host = "node-07";
  hello.local_index = 1;
  hello.device = "NVIDIA H100 80GB HBM3";
  hello.cpu_model = "AMD EPYC 9654 96-Core Processor";
  hello.node_cores = 192;
  EXPECT_EQ(hello, deserialize_hello(serialize(hello)));
}

TEST(WorkerHelloMessage, AMissingFieldIsRefused) {
  const auto bytes = nlohmann::json::to_msgpack(
      {{"world_rank", 1}, {"host", "h"}, {"local_index", 0}, {"device", "cpu"}});
  EXPECT_THROW(deserialize_hello(bytes), Error);
}

TEST(CellProgressMessage, RoundTripsEveryField) {
  const CellProgress progress{"00ff00ff00ff00ff", "measured", 40, 100};
  EXPECT_EQ(progress, deserialize_progress(serialize(progress)));
  const auto bytes = nlohmann::json::to_msgpack({{"cell_id", "x"}, {"stage", "warmup"}});
  EXPECT_THROW(deserialize_progress(bytes), Error);
}

TEST(RankResultMessage, PhaseStartsRoundTripWithTheirNaNs) {
  // Note [Shared cell clock]: a phase that did not run in a row is NaN and stays NaN.
  RankResult result;
  result.cell_id = "c";
  result.phases = {"forward", "step"};
  result.timings_s = {0.1, 0.3, 0.0, 0.2};
  result.phase_starts_s = {0.01, 0.0, std::nan(""), 0.3};
  const RankResult back = deserialize_result(serialize(result));
  ASSERT_EQ(back.phase_starts_s.size(), 4U);
  EXPECT_EQ(back.phase_starts_s[0], 0.01);
  EXPECT_EQ(back.phase_starts_s[1], 0.0);
  EXPECT_TRUE(std::isnan(back.phase_starts_s[2]));
  EXPECT_EQ(back.phase_starts_s[3], 0.3);
}

TEST(RankResultMessage, UntrustedReasonsRoundTrip) {
  // Note [Program steps asked and run]: a program cell's reasons reach rank 0.
  RankResult result;
  result.cell_id = "c";
  result.untrusted_reasons = {"steps: the program ran 8 steps, 20 were asked", "code: shadowed"};
  EXPECT_EQ(deserialize_result(serialize(result)).untrusted_reasons, result.untrusted_reasons);
}

TEST(RankResultMessage, AccuracyTravelsWithItsInfinities) {
  RankResult result;
  EXPECT_EQ(deserialize_result(serialize(result)).accuracy, std::nullopt);
  OutputSums sums;  // outputs equal to the reference: PSNR +inf must survive the message
  sums.samples = 1;
  sums.elements = 4;
  sums.sum_abs_ref = 10;
  sums.dot = 30;
  sums.out_sq = 30;
  sums.ref_sq = 30;
  sums.max_abs_ref = 4;
  result.accuracy = finish_inference(sums, 1.0, 4.0, 0.01);
  const RankResult back = deserialize_result(serialize(result));
  ASSERT_TRUE(back.accuracy.has_value());
  EXPECT_TRUE(std::isinf(back.accuracy->values.at("psnr_db")));
  EXPECT_EQ(back, result);
}

TEST(RankResultMessage, TheFailurePhaseAndFatalTravel) {
  RankResult result;
  result.status = CellStatus::kFailed;
  result.failed_phase = FailurePhase::kCheckpointLoad;
  result.fatal = true;
  EXPECT_EQ(deserialize_result(serialize(result)), result);
}

TEST(RankResultMessage, TheOperatorTableTravels) {
  RankResult result;
  result.cell_id = "0123456789abcdef";
  result.profile = OpProfile{.steps = 3,
                             .activities = {"cpu"},
                             .ops = {{.name = "aten::mm",
                                      .phase = "forward",
                                      .device = "cpu",
                                      .count = 6,
                                      .self_s = 0.25,
                                      .total_s = 0.5,
                                      .self_cpu_memory_bytes = 1024}}};
  EXPECT_EQ(deserialize_result(serialize(result)), result);
  RankResult without;
  EXPECT_FALSE(deserialize_result(serialize(without)).profile.has_value());
}

TEST(RankResultMessage, ValidationOutputsTravel) {
  RankResult result;
  result.cell_id = "c";
  OutputArray outputs;
  outputs.shape = {3, 2, 2};
  outputs.values = {0.5F,  -1.0F, 2.0F, 3.25F, 0.0F,  1e-7F,
                    -0.0F, 7.0F,  8.5F, -9.0F, 1e30F, std::numeric_limits<float>::min()};
  result.validation_outputs = outputs;
  const RankResult back = deserialize_result(serialize(result));
  ASSERT_TRUE(back.validation_outputs.has_value());
  EXPECT_EQ(*back.validation_outputs, *result.validation_outputs);
}

}  // namespace
}  // namespace scalebench
