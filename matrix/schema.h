// JSON Schema validation of YAML documents (valijson, on a typed JSON copy of the YAML), with every
// schema error mapped back to the YAML node's line and column.
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "common/base/diagnostics.h"

namespace scalebench {

/// Folder of the JSON Schema files, found at run time: $SCALEBENCH_SCHEMA_DIR when set,
/// else <executable>/../share/scalebench/schemas of an installed scalebench (`cmake --install`),
/// else the schemas/ of the source tree the build was configured from (build_info).
std::filesystem::path schema_dir();

/// The complete schema `schema_file` (a file name in schema_dir()) as scalebench checks
/// with it: the file plus the settings of the settings table (add_settings_to_schema).
/// Throws Error when the file cannot be read.
nlohmann::json schema_document(const std::string& schema_file);

/// Validates `document` against `schema_file` (a file name in schema_dir(); "$ref"s to
/// other files there are resolved). Adds one error per problem to `diagnostics`, at the
/// offending node, with a message that says what to change. Throws Error when a schema
/// file cannot be read (an installation problem, not bad input).
void validate_with_schema(const YAML::Node& document, const std::string& schema_file,
                          const std::string& file, Diagnostics& diagnostics);

/// The YAML document as JSON with YAML 1.2 core-schema scalar types (plain 8 -> integer,
/// 0.5 -> number, true -> boolean, null/~ -> null; quoted scalars -> strings). Of
/// duplicate keys the first wins, as in yaml-cpp lookups. Validation runs on this JSON
/// with strict types: valijson 1.0's yaml-cpp adapter is weakly typed (every scalar is a
/// string, and a list passes as a string) and does not compile with `uniqueItems`.
nlohmann::json yaml_to_json(const YAML::Node& node);

/// "experiments[0].model" from valijson's context {"<root>", "[experiments]", "[0]", "[model]"}.
std::string key_path_from_context(const std::vector<std::string>& context);

/// Human description of a YAML node's kind and value for messages: "the string 'abc'",
/// "a list", "a mapping", "nothing (null)".
std::string describe_node(const YAML::Node& node);

/// Location (1-based) of `node` in `file`, with `key_path`.
SourceLocation location_of(const YAML::Node& node, const std::string& file,
                           const std::string& key_path);

}  // namespace scalebench
