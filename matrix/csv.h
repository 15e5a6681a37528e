// RFC 4180 CSV parsing (quoted fields with commas, newlines and "" escapes) with
// positions, used to read CytoDL task files.
#pragma once

#include <string>
#include <vector>

#include "common/base/diagnostics.h"

namespace scalebench {

struct CsvField {
  std::string value;  ///< unquoted, "" unescaped
  int line = 0;       ///< 1-based position of the field's first character
  int column = 0;
};

struct CsvRecord {
  int line = 0;  ///< 1-based line where the record starts
  std::vector<CsvField> fields;
};

/// Parses `text` into records; blank lines are skipped. Syntax errors (an unclosed
/// quote, text after a closing quote) go to `diagnostics` with their position; the
/// records read so far are returned.
std::vector<CsvRecord> parse_csv(const std::string& text, const std::string& file,
                                 Diagnostics& diagnostics);

}  // namespace scalebench
