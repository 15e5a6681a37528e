#include "common/matrix_text.h"

#include <algorithm>

namespace scalebench {
namespace {

/// Length of the valid UTF-8 sequence at text[i], or 0 when it is invalid.
size_t utf8_sequence_length(const std::string& text, size_t i) {
  const auto byte = static_cast<unsigned char>(text[i]);
  size_t length = 0;
  unsigned int code_point = 0;
  if (byte < 0x80) return 1;
  if ((byte & 0xE0) == 0xC0) {
    length = 2;
    code_point = byte & 0x1F;
  } else if ((byte & 0xF0) == 0xE0) {
    length = 3;
    code_point = byte & 0x0F;
  } else if ((byte & 0xF8) == 0xF0) {
    length = 4;
    code_point = byte & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (next & 0x3F);
  }
  static constexpr unsigned int kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code_point < kMinimum[length] || code_point > 0x10FFFF ||
      (code_point >= 0xD800 && code_point <= 0xDFFF)) {
    return 0;  // overlong encoding, out of range, or a surrogate
  }
  return length;
}

}  // namespace

bool check_text_encoding(const std::string& text, const std::string& file,
                         Diagnostics& diagnostics) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    diagnostics.error({file, 0, 0, ""},
                      "the file is empty; write a matrix (see docs/matrix-reference.md)");
    return false;
  }
  bool ok = true;
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) {
    diagnostics.error({file, 1, 1, ""},
                      "the file starts with a UTF-8 byte-order mark (EF BB BF); save it as "
                      "UTF-8 without BOM");
    ok = false;
  }
  int line = 1;
  size_t line_start = 0;
  bool line_reported = false;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\n') {
      ++line;
      line_start = ++i;
      line_reported = false;
      continue;
    }
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      if (!line_reported) {
        diagnostics.error({file, line, static_cast<int>(i - line_start) + 1, ""},
                          "invalid UTF-8 byte; save the file as UTF-8");
        line_reported = true;
      }
      ok = false;
      ++i;
    } else {
      i += length;
    }
  }
  return ok;
}

void check_yaml_indentation(const std::string& text, const std::string& file,
                            Diagnostics& diagnostics) {
  int line = 1;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    for (size_t i = start; i < end && (text[i] == ' ' || text[i] == '\t'); ++i) {
      if (text[i] == '\t') {
        diagnostics.error({file, line, static_cast<int>(i - start) + 1, ""},
                          "tab in indentation; YAML allows only spaces there, replace the tab "
                          "with spaces");
        break;
      }
    }
    if (end == text.size()) break;
    start = end + 1;
    ++line;
  }
}

}  // namespace scalebench
