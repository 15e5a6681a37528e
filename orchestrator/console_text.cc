#include "orchestrator/console_text.h"

namespace scalebench {

std::string wrap_words(std::string_view text, std::string_view first, std::string_view rest,
                       size_t width) {
  std::string out;
  std::string line(first);
  bool line_has_word = false;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    start = end + 1;
    if (word.empty()) continue;
    if (line_has_word && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = std::string(rest);
      line_has_word = false;
    }
    if (line_has_word) line += ' ';
    line += word;
    line_has_word = true;
  }
  out += line + "\n";
  return out;
}

}  // namespace scalebench
