// The hello a worker sends rank 0 round-trips through its MessagePack form, and a hello
// missing a field is refused with what is wrong.
#include "common/cell/messages.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/base/error.h"

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

}  // namespace
}  // namespace scalebench
