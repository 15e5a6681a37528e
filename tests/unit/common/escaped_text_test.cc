#include "common/base/escaped_text.h"

#include <gtest/gtest.h>

namespace scalebench {
namespace {

TEST(Escaped, ControlCharactersBecomeEscapes) {
  const struct {
    std::string in;
    std::string out;
  } cases[] = {
      {"", ""},
      {"runs/a.h5", "runs/a.h5"},
      {"a\nb", "a\\nb"},
      {"a\rb\tc", "a\\rb\\tc"},
      {std::string("nul\0x", 5), "nul\\x00x"},
      {"\x1b[2J", "\\x1b[2J"},
      {"del\x7f", "del\\x7f"},
      {"back\\slash", "back\\slash"},
      {"gr\xc3\xbc\xc3\x9f", "gr\xc3\xbc\xc3\x9f"},  // UTF-8 kept
  };
  for (const auto& c : cases) EXPECT_EQ(c.out, escaped(c.in)) << c.in;
  EXPECT_EQ("dir/x\\ny.h5", escaped(std::filesystem::path("dir/x\ny.h5")));
}

}  // namespace
}  // namespace scalebench
