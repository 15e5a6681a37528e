#include "common/base/diagnostics.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <tuple>

namespace scalebench {

void Diagnostics::error(const SourceLocation& where, const std::string& message) {
  errors_.push_back({where, message});
}

void Diagnostics::warning(const SourceLocation& where, const std::string& message) {
  warnings_.push_back({where, message});
}

std::string format_diagnostic(const Diagnostic& diagnostic, const std::string& prefix) {
  const auto& where = diagnostic.where;
  std::string text = where.file;
  if (where.line > 0) {
    text += ":" + std::to_string(where.line);
    if (where.column > 0) text += ":" + std::to_string(where.column);
  }
  if (!text.empty()) text += ": ";
  text += prefix;
  if (!where.key_path.empty()) text += where.key_path + ": ";
  return text + diagnostic.message;
}

std::string Diagnostics::error_text() const {
  std::vector<Diagnostic> sorted = errors_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.where.line, a.where.column) < std::tie(b.where.line, b.where.column);
  });
  std::vector<std::string> lines;
  std::set<std::string> seen;
  size_t more = 0;
  for (const auto& diagnostic : sorted) {
    auto line = format_diagnostic(diagnostic);
    if (!seen.insert(line).second) continue;
    if (lines.size() < kMaxReportedErrors) {
      lines.push_back(std::move(line));
    } else {
      ++more;
    }
  }
  if (more > 0) {
    lines.push_back("... and " + std::to_string(more) + " more problems; fix the ones above first");
  }
  return join(lines, "\n");
}

std::vector<std::string> Diagnostics::warning_lines() const {
  std::vector<std::string> lines;
  for (const auto& diagnostic : warnings_)
    lines.push_back(format_diagnostic(diagnostic, "warning: "));
  return lines;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> previous(b.size() + 1);
  std::iota(previous.begin(), previous.end(), size_t{0});
  std::vector<size_t> current(b.size() + 1);
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(1, word.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const auto& candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += separator;
    text += items[i];
  }
  return text;
}

}  // namespace scalebench
