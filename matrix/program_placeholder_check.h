// Note [Program placeholders] at the element that holds them: every `{name}` of a program's
// command, env and preflight command checked where the matrix file writes it (line:column of
// that list item or env value, with the closest known name), on the YAML tree itself, so it is
// found even when the schema check found other errors in the same file (every error of a
// file in one pass: issue 54). Expansion checks the same names again for programs that were
// not read from YAML nodes.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "common/base/diagnostics.h"

namespace scalebench {

/// The names a placeholder may have: kProgramPlaceholders and every setting's key.
std::vector<std::string> known_program_placeholders();

/// The error text for an unknown placeholder `name` in `text`, with a suggestion when one is
/// close ("did you mean {batch_size}?").
std::string unknown_placeholder_message(const std::string& name, const std::string& text);

/// Checks the scalars of `program` (a `program:` mapping or a program template's root):
/// `command` and `preflight` items, `env` values. Nodes of the wrong type are skipped (the
/// schema reports them). `at` is the key path of `program` ("experiments[0].program").
void check_program_placeholders(const YAML::Node& program, const std::string& at,
                                const std::string& file, Diagnostics& diagnostics);

/// check_program_placeholders for each `experiments[i].program` of a matrix's root.
void check_matrix_program_placeholders(const YAML::Node& root, const std::string& file,
                                       Diagnostics& diagnostics);

}  // namespace scalebench
