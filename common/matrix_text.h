// Checks of a matrix file's raw bytes that parsers miss or report badly: empty file,
// UTF-8 byte-order mark, invalid UTF-8, tabs in YAML indentation.
#pragma once

#include <string>

#include "common/diagnostics.h"

namespace scalebench {

/// Adds an error for an empty (or whitespace-only) text, a UTF-8 BOM and each line with
/// invalid UTF-8. Returns false when the text must not be parsed further.
bool check_text_encoding(const std::string& text, const std::string& file,
                         Diagnostics& diagnostics);

/// Adds an error for each line whose indentation contains a tab (YAML forbids tabs there).
void check_yaml_indentation(const std::string& text, const std::string& file,
                            Diagnostics& diagnostics);

/// Adds an error for a quoted scalar ("..." or '...') that is never closed. yaml-cpp 0.7
/// silently ends such a scalar at the end of the file, swallowing the rest of it.
void check_yaml_quotes(const std::string& text, const std::string& file, Diagnostics& diagnostics);

}  // namespace scalebench
