// The matrix text as a results file keeps it (root attribute `matrix_text`).
//
// Note [Stored matrix text]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The results file keeps the matrix file's text, so a reader sees what was run. A program's
// `env` may hold secrets (AWS_SECRET_ACCESS_KEY, HF_TOKEN): the stored spec replaces every value
// the storage rule does not admit (program_env_value_stored, Note [Environment allowlist]), and
// the stored text must do the same, or the secret is one attribute away. So:
//  * a matrix without such a value is kept verbatim, comments and layout included;
//  * a YAML matrix with one is parsed and written again (yaml-cpp's emitter) with each such
//    value replaced, every other scalar as written (quoted ones quoted, flow collections in
//    flow style, anchors expanded), after a first comment line saying so. The file's comments
//    are not kept: a commented-out `# HF_TOKEN: ...` line is as secret as a live one.
// Rejected: replacing the values inside the text in place. A YAML scalar's extent (quoted,
// block, multi-line plain, aliased) is known only to the parser, and yaml-cpp reports where a
// node begins, not where it ends; a redaction that misses one spelling leaks the secret.
// A CytoDL task CSV has no `env` column (a program template's env is in its own file, which the
// results file does not keep): it is kept verbatim.
#pragma once

#include <functional>
#include <string>

namespace scalebench {

/// Decides whether the value of a program `env` entry named `name` may be stored.
using EnvValueRule = std::function<bool(const std::string& name, const std::string& value)>;

/// `text` (a matrix file of `format` "yaml", or a CSV format) as it may be stored: every
/// program `env` value that `stored` refuses written as `replacement` (Note [Stored matrix
/// text]). Pure. A YAML text that does not parse (never the case for a loaded matrix) is
/// replaced whole by one comment line, since what it holds cannot be told.
[[nodiscard]] std::string stored_matrix_text(const std::string& text, const std::string& format,
                                             const EnvValueRule& stored,
                                             const std::string& replacement);

}  // namespace scalebench
