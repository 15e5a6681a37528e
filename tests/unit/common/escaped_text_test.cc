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

namespace scalebench {
namespace {

TEST(PrintableOutput, KeepsLinesAndUtf8AndEscapesTheRest) {
  EXPECT_EQ(printable_output("a\tb\nc\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "a\tb\nc\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(printable_output(std::string("x\0y\x1b[2Jz\r", 9)), "x\\x00y\\x1b[2Jz\\r");
  // Invalid UTF-8: a lone continuation byte, a truncated sequence, an overlong form, a
  // surrogate; each offending byte becomes U+FFFD.
  EXPECT_EQ(printable_output("\x80"), "\xef\xbf\xbd");
  EXPECT_EQ(printable_output("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(printable_output("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(printable_output("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(PrintableLine, EscapesLinesAndTabsToo) {
  // A record quoted in a reason: one line, no escape sequence, valid UTF-8 (issue 41).
  EXPECT_EQ(printable_line("a\tb\nc\xc3\xa9"), "a\\tb\\nc\xc3\xa9");
  EXPECT_EQ(printable_line("\x1b]0;title\x07\x1b[2J\xff"),
            "\\x1b]0;title\\x07\\x1b[2J\xef\xbf\xbd");
}

TEST(Utf8Prefix, NeverCutsACharacter) {
  const std::string euro = "\xe2\x82\xac";  // 3 bytes
  EXPECT_EQ(utf8_prefix("abc", 5), "abc");
  EXPECT_EQ(utf8_prefix("ab" + euro, 4), "ab");
  EXPECT_EQ(utf8_prefix("ab" + euro, 5), "ab" + euro);
  EXPECT_EQ(utf8_prefix(euro + euro, 3), euro);
  EXPECT_EQ(utf8_prefix(euro, 0), "");
  EXPECT_EQ(utf8_prefix("\xff\xff\xff", 2), "\xff\xff");  // invalid bytes: one each
}

}  // namespace
}  // namespace scalebench
