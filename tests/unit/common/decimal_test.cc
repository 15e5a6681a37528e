#include "common/base/decimal.h"

#include <gtest/gtest.h>

#include <optional>
#include <string_view>

namespace scalebench {
namespace {

TEST(ParseDecimal, AcceptsWholeDecimalTextOnly) {
  const struct {
    std::string_view text;
    std::optional<int64_t> expected;
  } cases[] = {
      {"0", 0},
      {"42", 42},
      {"-7", -7},
      {"9223372036854775807", INT64_MAX},
      {"9223372036854775808", std::nullopt},  // overflow
      {"", std::nullopt},
      {"+1", std::nullopt},
      {" 1", std::nullopt},
      {"1 ", std::nullopt},
      {"1x", std::nullopt},
      {"0x10", std::nullopt},
      {"1.5", std::nullopt},
      {"-", std::nullopt},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse_decimal(c.text), c.expected) << "'" << c.text << "'";
  }
}

}  // namespace
}  // namespace scalebench
