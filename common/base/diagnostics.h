// Collected user-input problems with their position in a file.
//
// Front ends (the matrix reader, later the experiment-file reader) do not stop at the
// first problem: they add every finding to a Diagnostics and, at the end, throw one
// error listing all of them. Each line reads
//   "file:line:column: key.path: what is wrong; what to change"
// (line and column 1-based; 0 means "whole file" and is left out).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace scalebench {

/// Where a problem is: file, 1-based line and column (0 = unknown), and the key path
/// inside the document ("experiments[1].input_shape"; "" for the document itself).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key_path;
};

struct Diagnostic {
  SourceLocation where;
  std::string message;  ///< "what is wrong; what to change"
};

/// Most errors error_text() lists; the rest are counted in one last line.
inline constexpr size_t kMaxReportedErrors = 100;

/// Ordered collection of errors and warnings. Not thread-safe.
class Diagnostics {
 public:
  void error(const SourceLocation& where, const std::string& message);
  void warning(const SourceLocation& where, const std::string& message);

  [[nodiscard]] bool has_errors() const { return !errors_.empty(); }
  [[nodiscard]] const std::vector<Diagnostic>& errors() const { return errors_; }
  [[nodiscard]] const std::vector<Diagnostic>& warnings() const { return warnings_; }

  /// Every error, one formatted line each (see format_diagnostic), sorted by line and
  /// column; exact repeats are dropped; past kMaxReportedErrors lines, one line counts
  /// the rest.
  [[nodiscard]] std::string error_text() const;
  /// Every warning, formatted with a "warning: " prefix after the location.
  [[nodiscard]] std::vector<std::string> warning_lines() const;

 private:
  std::vector<Diagnostic> errors_;
  std::vector<Diagnostic> warnings_;
};

/// "file:line:column: key.path: message"; parts that are unknown are left out.
std::string format_diagnostic(const Diagnostic& diagnostic, const std::string& prefix = "");

/// Levenshtein distance between two byte strings.
size_t edit_distance(const std::string& a, const std::string& b);

/// The candidate closest to `word` when it is close enough to be a likely typo
/// (distance <= max(1, word.size() / 3)); "" otherwise.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

/// "a, b, c" (for messages that list the allowed values).
std::string join(const std::vector<std::string>& items, const std::string& separator = ", ");

}  // namespace scalebench
