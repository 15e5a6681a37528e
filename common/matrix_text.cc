#include "common/matrix_text.h"

#include <algorithm>
#include <optional>

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

namespace {

/// Indentation of the line that starts at `start`.
size_t indentation(const std::string& text, size_t start) {
  size_t i = start;
  while (i < text.size() && text[i] == ' ') ++i;
  return i - start;
}

/// Index after the quoted scalar opened at text[open], or npos when it never closes.
size_t skip_quoted(const std::string& text, size_t open) {
  const char quote = text[open];
  for (size_t i = open + 1; i < text.size(); ++i) {
    if (quote == '"' && text[i] == '\\') {
      ++i;
    } else if (text[i] == quote) {
      if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;
      } else {
        return i + 1;
      }
    }
  }
  return std::string::npos;
}

}  // namespace

void check_yaml_quotes(const std::string& text, const std::string& file, Diagnostics& diagnostics) {
  bool value_start = true;
  size_t line_start = 0;
  int line = 1;
  std::optional<size_t> block_indent;  // inside a | or > block scalar deeper than this
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (i == line_start && block_indent) {
      const size_t indent = indentation(text, i);
      const bool blank = i + indent >= text.size() || text[i + indent] == '\n';
      if (blank || indent > *block_indent) {
        const size_t end = text.find('\n', i);
        if (end == std::string::npos) return;
        i = end - 1;
        continue;
      }
      block_indent.reset();
    }
    if (c == '\n') {
      ++line;
      line_start = i + 1;
      value_start = true;
    } else if (c == '#' && (i == line_start || text[i - 1] == ' ')) {
      const size_t end = text.find('\n', i);
      if (end == std::string::npos) return;
      i = end - 1;
    } else if (value_start && (c == '"' || c == '\'')) {
      const size_t close = skip_quoted(text, i);
      if (close == std::string::npos) {
        diagnostics.error({file, line, static_cast<int>(i - line_start) + 1, ""},
                          std::string("unclosed quote: the ") + c +
                              " opened here is never closed; add the closing " + c);
        return;
      }
      for (size_t k = i; k < close; ++k) {
        if (text[k] == '\n') {
          ++line;
          line_start = k + 1;
        }
      }
      i = close - 1;
      value_start = false;
    } else if (value_start && (c == '|' || c == '>')) {
      block_indent = indentation(text, line_start);
      value_start = false;
    } else if (c == '[' || c == '{' || c == ',' ||
               ((c == ':' || c == '-' || c == '?') &&
                (i + 1 >= text.size() || text[i + 1] == ' ' || text[i + 1] == '\n'))) {
      value_start = true;
    } else if (c != ' ') {
      value_start = false;
    }
  }
}

}  // namespace scalebench
