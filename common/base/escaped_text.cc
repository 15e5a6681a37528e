#include "common/base/escaped_text.h"

#include <algorithm>
#include <array>

namespace scalebench {
namespace {

/// Length of the valid UTF-8 sequence at the start of `text` (1..4), 0 when it is not one
/// (overlong forms, surrogates and code points above U+10FFFF are not valid).
size_t utf8_sequence_length(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const auto continuation = [&](size_t i) { return i < text.size() && (byte(i) & 0xc0) == 0x80; };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return continuation(1) ? 2 : 0;
  if (lead >= 0xe0 && lead <= 0xef) {
    if (!continuation(1) || !continuation(2)) return 0;
    if (lead == 0xe0 && byte(1) < 0xa0) return 0;   // overlong
    if (lead == 0xed && byte(1) >= 0xa0) return 0;  // surrogate
    return 3;
  }
  if (lead >= 0xf0 && lead <= 0xf4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return 0;
    if (lead == 0xf0 && byte(1) < 0x90) return 0;   // overlong
    if (lead == 0xf4 && byte(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

/// printable_output() when `keep_lines`, else printable_line().
std::string printable(std::string_view text, bool keep_lines) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const auto first = static_cast<unsigned char>(text.front());
    if (keep_lines && (first == '\n' || first == '\t')) {
      out += text.front();
      text.remove_prefix(1);
      continue;
    }
    if (first < 0x20 || first == 0x7f) {
      out += escaped(text.substr(0, 1));
      text.remove_prefix(1);
      continue;
    }
    const size_t length = utf8_sequence_length(text);
    if (length == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD REPLACEMENT CHARACTER
      text.remove_prefix(1);
      continue;
    }
    out.append(text.substr(0, length));
    text.remove_prefix(length);
  }
  return out;
}

}  // namespace

std::string printable_output(std::string_view text) { return printable(text, true); }

std::string printable_line(std::string_view text) { return printable(text, false); }

std::string_view utf8_prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = 0;
  while (end < max_bytes) {
    const size_t length = std::max<size_t>(1, utf8_sequence_length(text.substr(end)));
    if (end + length > max_bytes) break;
    end += length;
  }
  return text.substr(0, end);
}

std::string escaped(std::string_view text) {
  static constexpr std::array<char, 16> kHex{'0', '1', '2', '3', '4', '5', '6', '7',
                                             '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out;
}

}  // namespace scalebench
