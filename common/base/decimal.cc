#include "common/base/decimal.h"

#include <charconv>
#include <system_error>

namespace scalebench {

std::optional<int64_t> parse_decimal(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace scalebench
