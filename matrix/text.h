// Checks of a matrix file's raw bytes that parsers miss or report badly: size, empty
// file, UTF-8 byte-order mark, invalid UTF-8, tabs in YAML indentation; and the bounds on a
// YAML document's structure (alias expansion, list length, nesting) checked before it is
// loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/base/diagnostics.h"

namespace scalebench {

// Note [Input limits]
// ~~~~~~~~~~~~~~~~~~~
// A matrix or task file is read whole and parsed before anything is checked, so a small
// hostile file could otherwise cost minutes and gigabytes: a YAML alias bomb (anchors that
// alias each other, each doubling the document yaml-cpp hands on: 478 bytes ran for
// minutes in the duplicate-key check, 386 bytes reached 4.5 GB) or a 100 MB list (8 GB of
// nodes). The limits below are far above any real matrix and are checked on the raw bytes
// and on yaml-cpp's parse events (check_yaml_structure), before the node tree is built,
// so refusing a file takes well under a second and memory in proportion to the limits.
// Each refusal names file:line and what to change; docs/matrix-reference.md ("What is
// checked") lists them. The cell count of the expanded matrix is bounded too
// (kMaxMatrixCells, checked by expand_matrix before the cross product is built): a few
// short sweep lists multiply.

/// Largest matrix (YAML) or CytoDL task (CSV) file read, in bytes (16 MiB).
inline constexpr std::uintmax_t kMaxMatrixFileBytes = std::uintmax_t{16} << 20;
/// Most nodes (scalars, lists, mappings; mapping keys included) of one YAML document
/// after every alias is expanded.
inline constexpr std::uint64_t kMaxYamlNodes = 100000;
/// Most entries of one YAML list. The JSON Schema's uniqueItems costs n^2/2 comparisons
/// per list (and valijson one error per repeated pair), so this stays small.
inline constexpr std::size_t kMaxYamlListLength = 1000;
/// Deepest nesting of YAML lists and mappings.
inline constexpr std::size_t kMaxYamlDepth = 64;
/// Most rows of a CytoDL task file (the header not counted), and fields of one row.
inline constexpr std::size_t kMaxCsvRows = 10000;
inline constexpr std::size_t kMaxCsvFields = 64;
/// Most cells one matrix expands to (before excludes, over all experiments and branches).
inline constexpr std::size_t kMaxMatrixCells = 100000;

/// Adds an error when `text` is longer than kMaxMatrixFileBytes, at the line where the
/// limit falls. Returns false then.
bool check_text_size(const std::string& text, const std::string& file, Diagnostics& diagnostics);

/// Adds an error for a text over kMaxMatrixFileBytes (check_text_size), an empty (or
/// whitespace-only) text, a UTF-8 BOM and each line with invalid UTF-8 or a control
/// character (other than tab and CR). Returns false when
/// the text must not be parsed further.
bool check_text_encoding(const std::string& text, const std::string& file,
                         Diagnostics& diagnostics);

/// Adds an error for each line whose indentation contains a tab (YAML forbids tabs there).
void check_yaml_indentation(const std::string& text, const std::string& file,
                            Diagnostics& diagnostics);

/// Adds an error for a quoted scalar ("..." or '...') that is never closed. yaml-cpp 0.7
/// silently ends such a scalar at the end of the file, swallowing the rest of it.
void check_yaml_quotes(const std::string& text, const std::string& file, Diagnostics& diagnostics);

/// Walks the parse events of the text's first YAML document without building it and adds
/// an error, at the line concerned, when aliases expand it past kMaxYamlNodes nodes (or
/// it has that many without aliases), a list has more than kMaxYamlListLength entries,
/// nesting goes deeper than kMaxYamlDepth, or an alias refers to a node that contains it
/// (a cycle). Stops at the first such problem and returns false; true when the document
/// may be loaded. A syntax error is left to the caller: YAML::ParserException propagates.
/// Time and memory are linear in the text, at most.
bool check_yaml_structure(const std::string& text, const std::string& file,
                          Diagnostics& diagnostics);

}  // namespace scalebench
