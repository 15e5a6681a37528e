#include "matrix/text.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

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

bool check_text_size(const std::string& text, const std::string& file, Diagnostics& diagnostics) {
  if (text.size() <= kMaxMatrixFileBytes) return true;
  const auto limit = static_cast<std::ptrdiff_t>(kMaxMatrixFileBytes);
  const auto line = 1 + std::count(text.begin(), text.begin() + limit, '\n');
  diagnostics.error({file, static_cast<int>(line), 0, ""},
                    "the file is larger than " + std::to_string(kMaxMatrixFileBytes >> 20) +
                        " MiB (" + std::to_string(kMaxMatrixFileBytes) +
                        " bytes), the limit for a matrix or task file, from this line on; "
                        "split it into several matrices");
  return false;
}

bool check_text_encoding(const std::string& text, const std::string& file,
                         Diagnostics& diagnostics) {
  if (!check_text_size(text, file, diagnostics)) return false;
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
    const auto byte = static_cast<unsigned char>(text[i]);
    if ((byte < 0x20 && byte != '\t' && byte != '\r') || byte == 0x7f) {
      if (!line_reported) {
        char code[8];
        std::snprintf(code, sizeof code, "0x%02x", byte);
        diagnostics.error({file, line, static_cast<int>(i - line_start) + 1, ""},
                          std::string("control character ") + code +
                              "; a matrix or task file is text, remove it");
        line_reported = true;
      }
      ok = false;
      ++i;
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
        // Skip the line, newline included (a blank line has nothing else: skipping to just
        // before its newline looped for ever; found by fuzz_matrix_yaml).
        const size_t end = text.find('\n', i);
        if (end == std::string::npos) return;
        i = end;
        ++line;
        line_start = i + 1;
        value_start = true;
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

namespace {

/// A limit of Note [Input limits] crossed at `where`.
struct StructureProblem {
  SourceLocation where;
  std::string message;
};

/// Counts the nodes of a YAML document as yaml-cpp parses it, an alias counting as the
/// whole node it refers to, and throws StructureProblem at the first limit crossed.
class StructureCheck : public YAML::EventHandler {
 public:
  StructureCheck(const std::string& text, std::string file) : text_(text), file_(std::move(file)) {}

  void OnDocumentStart(const YAML::Mark& /*mark*/) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                const std::string& /*value*/) override {
    leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    for (const auto& frame : stack_) {
      if (frame.anchor != YAML::NullAnchor && frame.anchor == anchor) {
        fail(mark, "the alias " + alias_name(mark) +
                       " refers to a node that contains it, which never ends; write the "
                       "values out instead");
      }
    }
    const auto found = expanded_.find(anchor);  // an unknown anchor is yaml-cpp's error
    const std::uint64_t nodes = found == expanded_.end() ? 1 : found->second;
    add_entry();
    add_nodes(nodes);
    if (total_ > kMaxYamlNodes) {
      fail(mark, "the alias " + alias_name(mark) + " (" + std::to_string(nodes) +
                     " nodes) takes the document past " + std::to_string(kMaxYamlNodes) +
                     " nodes once aliases are expanded, the limit for a matrix; write the "
                     "values out or use fewer, smaller aliases");
    }
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value /*style*/) override {
    open(mark, anchor, true);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value /*style*/) override {
    open(mark, anchor, false);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    YAML::Mark mark;
    YAML::anchor_t anchor = YAML::NullAnchor;
    bool sequence = false;
    std::uint64_t nodes = 1;  ///< of the node, expanded, so far
    std::size_t entries = 0;
  };

  [[noreturn]] void fail(const YAML::Mark& mark, std::string message) const {
    throw StructureProblem{{file_, mark.line + 1, mark.column + 1, ""}, std::move(message)};
  }

  /// "*name" as written at `mark`.
  std::string alias_name(const YAML::Mark& mark) const {
    const auto start = static_cast<std::size_t>(std::max(0, mark.pos));
    const std::size_t end = std::min(text_.find_first_of(" \t\r\n,]}", start), text_.size());
    return text_.substr(start, std::min<std::size_t>(end - start, 64));
  }

  /// Counts one more entry of the enclosing list.
  void add_entry() {
    if (stack_.empty() || !stack_.back().sequence) return;
    if (++stack_.back().entries > kMaxYamlListLength) {
      fail(stack_.back().mark, "this list has more than " + std::to_string(kMaxYamlListLength) +
                                   " entries, the limit for a matrix; shorten it or split "
                                   "the matrix into several files");
    }
  }

  void add_nodes(std::uint64_t nodes) {
    // Saturating: a bomb's counts grow exponentially; anything past the limit is refused.
    const auto plus = [](std::uint64_t a, std::uint64_t b) {
      return std::min(a + std::min(b, kMaxYamlNodes + 1), kMaxYamlNodes + 1);
    };
    total_ = plus(total_, nodes);
    if (!stack_.empty()) stack_.back().nodes = plus(stack_.back().nodes, nodes);
  }

  void check_total(const YAML::Mark& mark) const {
    if (total_ > kMaxYamlNodes) {
      fail(mark, "the document has more than " + std::to_string(kMaxYamlNodes) +
                     " nodes, the limit for a matrix; shorten it or split the matrix into "
                     "several files");
    }
  }

  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    add_entry();
    add_nodes(1);
    if (anchor != YAML::NullAnchor) expanded_[anchor] = 1;
    check_total(mark);
  }

  void open(const YAML::Mark& mark, YAML::anchor_t anchor, bool sequence) {
    add_entry();
    if (stack_.size() >= kMaxYamlDepth) {
      fail(mark, "lists and mappings nested more than " + std::to_string(kMaxYamlDepth) +
                     " levels deep, the limit for a matrix; flatten the structure");
    }
    total_ = std::min(total_ + 1, kMaxYamlNodes + 1);
    stack_.push_back({mark, anchor, sequence});
    check_total(mark);
  }

  void close() {
    const Frame frame = stack_.back();
    stack_.pop_back();
    if (frame.anchor != YAML::NullAnchor) expanded_[frame.anchor] = frame.nodes;
    if (!stack_.empty()) {
      stack_.back().nodes = std::min(stack_.back().nodes + frame.nodes, kMaxYamlNodes + 1);
    }
  }

  const std::string& text_;
  std::string file_;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, std::uint64_t> expanded_;  ///< nodes of each anchored node
  std::uint64_t total_ = 0;
};

}  // namespace

bool check_yaml_structure(const std::string& text, const std::string& file,
                          Diagnostics& diagnostics) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  StructureCheck check(text, file);
  try {
    parser.HandleNextDocument(check);
  } catch (const StructureProblem& problem) {
    diagnostics.error(problem.where, problem.message);
    return false;
  }
  return true;
}

}  // namespace scalebench
