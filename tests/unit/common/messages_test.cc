// The hello a worker sends rank 0 round-trips through its MessagePack form, and a hello
// missing a field is refused with what is wrong.
#include "common/messages.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"

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

}  // namespace
}  // namespace scalebench
