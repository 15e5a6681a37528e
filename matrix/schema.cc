#include "matrix/schema.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <utility>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "common/base/build_info.h"
#include "common/base/error.h"
#include "common/cell/settings.h"

namespace scalebench {
namespace {

using Json = nlohmann::json;

/// Removes every "uniqueItems" of a schema. See SchemaDocuments.
void strip_unique_items(Json& schema) {
  if (schema.is_object()) {
    schema.erase("uniqueItems");
    for (auto& entry : schema.items()) strip_unique_items(entry.value());
  } else if (schema.is_array()) {
    for (auto& value : schema) strip_unique_items(value);
  }
}

/// The schema files, parsed once per validation; `$ref`s are resolved against this map.
/// For validation (`for_validation`), "uniqueItems" is left out: valijson compares every
/// pair of a list and reports every repeated pair (a list of 1000 equal values: 500000
/// errors, seconds and gigabytes), so the matrix reader checks repeats itself, once per list
/// (check_repeats in matrix/yaml.cc). The printed schema keeps it, for editors.
class SchemaDocuments {
 public:
  explicit SchemaDocuments(bool for_validation = false) : for_validation_(for_validation) {}

  const Json& get(const std::string& file) {
    auto found = documents_.find(file);
    if (found != documents_.end()) return *found->second;
    const auto path = schema_dir() / file;
    std::ifstream in(path);
    if (!in) {
      throw Error("cannot read the JSON Schema " + path.string() +
                  "; set SCALEBENCH_SCHEMA_DIR to the schemas/ folder of scalebench");
    }
    auto document = std::make_unique<Json>();
    try {
      in >> *document;
    } catch (const Json::exception& e) {
      throw Error("the JSON Schema " + path.string() + " is not valid JSON: " + e.what());
    }
    add_settings_to_schema(file, *document);
    if (for_validation_) strip_unique_items(*document);
    return *documents_.emplace(file, std::move(document)).first->second;
  }

 private:
  bool for_validation_;
  std::map<std::string, std::unique_ptr<Json>> documents_;
};

/// Steps: "[name]" -> "name". valijson writes both keys and indexes in brackets.
std::vector<std::string> path_steps(const std::vector<std::string>& context) {
  std::vector<std::string> steps;
  for (size_t i = 1; i < context.size(); ++i) {
    const auto& part = context[i];
    steps.push_back(part.size() >= 2 ? part.substr(1, part.size() - 2) : part);
  }
  return steps;
}

bool is_index(const std::string& step) {
  return !step.empty() && step.find_first_not_of("0123456789") == std::string::npos;
}

/// The YAML node at `steps` (an invalid node when a step does not exist).
YAML::Node node_at(const YAML::Node& root, const std::vector<std::string>& steps) {
  // YAML::Node::operator= would overwrite the referenced node's content: rebind with reset().
  YAML::Node node;
  node.reset(root);
  for (const auto& step : steps) {
    YAML::Node next(YAML::NodeType::Undefined);
    if (node.IsSequence() && is_index(step)) {
      const size_t index = std::stoul(step);
      if (index < node.size()) next.reset(node[index]);
    } else if (node.IsMap()) {
      for (const auto& entry : node) {
        if (entry.first.IsScalar() && entry.first.Scalar() == step) {
          next.reset(entry.second);
          break;
        }
      }
    }
    if (!next.IsDefined()) return next;
    node.reset(next);
  }
  return node;
}

/// The key node named `key` of the mapping `map` (for the position of an unknown key).
YAML::Node key_node(const YAML::Node& map, const std::string& key) {
  if (map.IsMap()) {
    for (const auto& entry : map) {
      if (entry.first.IsScalar() && entry.first.Scalar() == key) return entry.first;
    }
  }
  return map;
}

/// Resolves "$ref": "file#/pointer" or "#/pointer" (relative to `file`).
std::pair<std::string, const Json*> resolve(SchemaDocuments& docs, std::string file,
                                            const Json* node) {
  for (int depth = 0; depth < 16 && node->is_object() && node->contains("$ref"); ++depth) {
    const auto ref = node->at("$ref").get<std::string>();
    const auto hash = ref.find('#');
    if (hash != 0) file = ref.substr(0, hash);
    const Json& document = docs.get(file);
    const std::string pointer = hash == std::string::npos ? "" : ref.substr(hash + 1);
    node = &document.at(Json::json_pointer(pointer));
  }
  return {file, node};
}

/// A schema file and a node in it.
using SchemaNode = std::pair<std::string, const Json*>;

/// `node` and the subschemas a value may be checked against in its place (anyOf
/// alternatives, if/then/else branches), each with its "$ref" resolved.
std::vector<SchemaNode> alternatives(SchemaDocuments& docs, const SchemaNode& node) {
  std::vector<SchemaNode> out{node};
  const auto& [file, schema] = node;
  if (schema->contains("anyOf")) {
    for (const auto& alternative : schema->at("anyOf"))
      out.push_back(resolve(docs, file, &alternative));
  }
  for (const char* branch : {"then", "else"}) {
    if (schema->contains(branch)) out.push_back(resolve(docs, file, &schema->at(branch)));
  }
  return out;
}

/// The schema node that describes the value at `steps` ({.., nullptr} when not found).
SchemaNode schema_at(SchemaDocuments& docs, const std::string& root_file,
                     const std::vector<std::string>& steps) {
  SchemaNode node = resolve(docs, root_file, &docs.get(root_file));
  for (const auto& step : steps) {
    std::optional<SchemaNode> next;
    for (const auto& [file, candidate] : alternatives(docs, node)) {
      if (candidate->contains("properties") && candidate->at("properties").contains(step)) {
        next = SchemaNode{file, &candidate->at("properties").at(step)};
      } else if (candidate->contains("items") && is_index(step)) {
        next = SchemaNode{file, &candidate->at("items")};
      }
      if (next) break;
    }
    if (!next) return {root_file, nullptr};
    node = resolve(docs, next->first, next->second);
  }
  return node;
}

std::vector<std::string> property_names(SchemaDocuments& docs, const SchemaNode& schema) {
  std::vector<std::string> names;
  if (!schema.second) return names;
  for (const auto& [file, candidate] : alternatives(docs, schema)) {
    if (!candidate->contains("properties")) continue;
    for (const auto& [name, value] : candidate->at("properties").items()) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}

std::string expected_text(const Json* schema) {
  if (!schema) return "a different value";
  if (schema->contains("anyOf") || !schema->contains("type")) {
    return schema->value("description", std::string("a different value"));
  }
  static const std::map<std::string, std::string> kTypes{
      {"string", "a string"}, {"integer", "an integer"},
      {"number", "a number"}, {"boolean", "true or false"},
      {"array", "a list"},    {"object", "a mapping (key: value)"}};
  const auto type = schema->at("type").get<std::string>();
  const auto found = kTypes.find(type);
  return found == kTypes.end() ? type : found->second;
}

/// The `enum` of `schema` or of one of its anyOf alternatives (nullptr if none).
const Json* find_enum(const Json* schema) {
  if (!schema) return nullptr;
  if (schema->contains("enum")) return &schema->at("enum");
  if (schema->contains("anyOf")) {
    for (const auto& alternative : schema->at("anyOf")) {
      if (alternative.contains("enum")) return &alternative.at("enum");
    }
  }
  return nullptr;
}

/// "an integer >= 1 or 'auto'" when `schema` is anyOf an integer and a one-word enum (a
/// setting with a keyword, common/cell/settings.h); "" otherwise.
std::string number_or_keyword(const Json* schema) {
  if (!schema || !schema->contains("anyOf")) return "";
  std::string number;
  std::string word;
  for (const auto& alternative : schema->at("anyOf")) {
    // A non-axis setting is "one value or a list of them": its value is a nested anyOf.
    if (alternative.contains("anyOf")) {
      if (std::string nested = number_or_keyword(&alternative); !nested.empty()) return nested;
      continue;
    }
    if (alternative.value("type", Json()) == "integer") {
      number = "an integer";
      if (alternative.contains("minimum")) number += " >= " + alternative.at("minimum").dump();
    } else if (alternative.contains("enum") && alternative.at("enum").size() == 1 &&
               alternative.at("enum").front().is_string()) {
      word = alternative.at("enum").front().get<std::string>();
    }
  }
  return number.empty() || word.empty() ? "" : number + " or '" + word + "'";
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

/// Text between the last pair of single quotes of `description`.
std::string quoted_name(const std::string& description) {
  const auto last = description.rfind('\'');
  const auto first = last == std::string::npos ? last : description.rfind('\'', last - 1);
  if (first == std::string::npos) return "";
  return description.substr(first + 1, last - first - 1);
}

/// YAML 1.2 core-schema typing of a scalar: plain scalars that look like integers,
/// floats, booleans or null become those; quoted scalars stay strings.
Json plain_scalar_to_json(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() != "?") return text;  // quoted or explicitly tagged: a string
  static const std::regex kInteger("[-+]?[0-9]+");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (text == "null" || text == "Null" || text == "NULL" || text == "~" || text.empty())
    return nullptr;
  if (std::regex_match(text, kInteger)) {
    try {
      return static_cast<int64_t>(std::stoll(text));
    } catch (const std::out_of_range&) {
      return std::stod(text);
    }
  }
  if (std::regex_match(text, kFloat)) {
    try {
      return std::stod(text);
    } catch (const std::out_of_range&) {
      return text;
    }
  }
  return text;
}

struct RawError {
  std::vector<std::string> steps;
  std::string description;
};

/// Turns one valijson error into a diagnostic; returns false for summary errors.
bool translate(const RawError& error, const YAML::Node& root, SchemaDocuments& docs,
               const std::string& schema_file, const std::string& file, Diagnostics& diagnostics) {
  const auto& text = error.description;
  const YAML::Node node = node_at(root, error.steps);
  const SchemaNode schema_node = schema_at(docs, schema_file, error.steps);
  const Json* schema = schema_node.second;
  std::string key_path = key_path_from_context([&] {
    std::vector<std::string> context{"<root>"};
    for (const auto& step : error.steps) context.push_back("[" + step + "]");
    return context;
  }());
  SourceLocation where = location_of(node, file, key_path);
  std::string message;
  if (starts_with(text, "Object contains a property")) {
    const auto key = quoted_name(text);
    const auto allowed = property_names(docs, schema_node);
    where = location_of(key_node(node, key), file, key_path.empty() ? key : key_path + "." + key);
    message = "unknown key '" + key + "'";
    const auto suggestion = closest_match(key, allowed);
    message += suggestion.empty() ? "; remove it" : "; did you mean '" + suggestion + "'?";
    message += " (allowed keys: " + join(allowed) + ")";
  } else if (starts_with(text, "Missing required property")) {
    message = "missing required key '" + quoted_name(text) + "'; add it";
  } else if (starts_with(text, "Value type not permitted") ||
             starts_with(text, "Failed to validate against any schemas allowed by anyOf")) {
    message = "expected " + expected_text(schema) + ", got " + describe_node(node);
  } else if (const std::string number_or_word = number_or_keyword(schema);
             starts_with(text, "Failed to match against any enum") && !number_or_word.empty()) {
    // A setting that takes an integer or a keyword (batch_size: 8 or auto): both failed.
    message = "expected " + number_or_word + ", got " + describe_node(node);
  } else if (starts_with(text, "Failed to match against any enum")) {
    const std::string value = node.IsScalar() ? node.Scalar() : "";
    const Json* values = find_enum(schema);
    std::vector<std::string> allowed;
    if (values) {
      for (const auto& v : *values)
        allowed.push_back(v.is_string() ? v.get<std::string>() : v.dump());
    }
    message = describe_node(node) + " is not allowed; use one of: " + join(allowed);
    const auto suggestion = closest_match(value, allowed);
    if (!suggestion.empty()) message += " (did you mean '" + suggestion + "'?)";
  } else if (starts_with(text, "Expected number greater than")) {
    if (schema && schema->contains("exclusiveMinimum")) {
      message = describe_node(node) + " is too small; use a value > " +
                schema->at("exclusiveMinimum").dump();
    } else {
      message = describe_node(node) + " is too small; use a value >= " +
                (schema ? schema->value("minimum", Json(0)).dump() : "the minimum");
    }
  } else if (starts_with(text, "Array should contain no fewer")) {
    message = "the list is empty; give at least one value";
  } else if (starts_with(text, "Object should have no fewer")) {
    message = "the mapping is empty; give at least one key (allowed keys: " +
              join(property_names(docs, schema_node)) + ")";
  } else if (starts_with(text, "Failed to match regex")) {
    message = describe_node(node) + " is not a valid value; expected " + expected_text(schema) +
              " (pattern " + (schema ? schema->value("pattern", std::string()) : "") + ")";
  } else if (starts_with(text, "String should be no fewer")) {
    message = "empty string; give a value";
  } else if (starts_with(text, "Failed to validate") || starts_with(text, "Cannot validate")) {
    return false;
  } else {
    message = text;
  }
  diagnostics.error(where, message);
  return true;
}

}  // namespace

Json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      Json object = Json::object();
      for (const auto& entry : node) {
        const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
        if (!object.contains(key)) object[key] = yaml_to_json(entry.second);
      }
      return object;
    }
    case YAML::NodeType::Sequence: {
      Json array = Json::array();
      for (const auto& item : node) array.push_back(yaml_to_json(item));
      return array;
    }
    case YAML::NodeType::Scalar:
      return plain_scalar_to_json(node);
    default:
      return nullptr;
  }
}

std::filesystem::path schema_dir() {
  if (const char* dir = std::getenv("SCALEBENCH_SCHEMA_DIR"); dir && *dir) return dir;
  std::error_code error;
  const auto executable = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    auto installed = executable.parent_path().parent_path() / "share" / "scalebench" / "schemas";
    if (std::filesystem::is_directory(installed, error)) return installed;
  }
  return build_info::source_dir() / "schemas";
}

std::string key_path_from_context(const std::vector<std::string>& context) {
  std::string path;
  for (const auto& step : path_steps(context)) {
    if (is_index(step)) {
      path += "[" + step + "]";
    } else {
      path += (path.empty() ? "" : ".") + step;
    }
  }
  return path;
}

std::string describe_node(const YAML::Node& node) {
  if (!node.IsDefined()) return "nothing";
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

SourceLocation location_of(const YAML::Node& node, const std::string& file,
                           const std::string& key_path) {
  SourceLocation where{file, 0, 0, key_path};
  if (node.IsDefined()) {
    const auto mark = node.Mark();
    if (mark.line >= 0) {
      where.line = mark.line + 1;
      where.column = mark.column + 1;
    }
  }
  return where;
}

nlohmann::json schema_document(const std::string& schema_file) {
  SchemaDocuments docs;
  return docs.get(schema_file);
}

void validate_with_schema(const YAML::Node& document, const std::string& schema_file,
                          const std::string& file, Diagnostics& diagnostics) {
  SchemaDocuments docs(true);
  valijson::Schema schema;
  valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
  const valijson::adapters::NlohmannJsonAdapter schema_adapter(docs.get(schema_file));
  parser.populateSchema(
      schema_adapter, schema,
      [&docs](const std::string& uri) -> const Json* {
        const auto hash = uri.find('#');
        return &docs.get(uri.substr(0, hash));
      },
      [](const Json*) {});
  valijson::Validator validator(valijson::Validator::kStrongTypes);
  valijson::ValidationResults results;
  const Json json = yaml_to_json(document);
  validator.validate(schema, valijson::adapters::NlohmannJsonAdapter(json), &results);
  std::vector<RawError> errors;
  valijson::ValidationResults::Error error;
  while (results.popError(error)) errors.push_back({path_steps(error.context), error.description});
  // An anyOf failure is reported only when nothing more precise was said about the node;
  // type mismatches of the alternatives that do not fit the node's kind are noise.
  std::map<std::vector<std::string>, int> precise_per_path;
  for (const auto& raw : errors) {
    if (!starts_with(raw.description, "Failed to validate") &&
        !starts_with(raw.description, "Value type not permitted")) {
      ++precise_per_path[raw.steps];
    }
  }
  std::map<std::vector<std::string>, bool> any_of_path;
  for (const auto& raw : errors) {
    if (starts_with(raw.description, "Failed to validate against any schemas allowed by anyOf")) {
      any_of_path[raw.steps] = true;
    }
  }
  for (const auto& raw : errors) {
    const bool in_any_of = any_of_path.count(raw.steps) > 0;
    const bool has_precise = precise_per_path.count(raw.steps) > 0;
    if (in_any_of && starts_with(raw.description, "Value type not permitted")) continue;
    if (in_any_of && has_precise && starts_with(raw.description, "Failed to validate")) continue;
    translate(raw, document, docs, schema_file, file, diagnostics);
  }
}

}  // namespace scalebench
