// Helpers over the settings table: lookup, text and JSON conversion, range checks, schema
// and docs. See Note [Settings table] in common/cell/settings.h.
#include "common/cell/settings.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <sstream>

#include "common/base/decimal.h"
#include "common/base/diagnostics.h"

namespace scalebench {
namespace {

/// A number as a user writes it: 1048576, 0.01, 604800 (no exponent for integral values).
std::string number_text(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e18) {
    return std::to_string(static_cast<int64_t>(value));
  }
  std::ostringstream out;
  out << value;
  return out.str();
}

double as_number(const SettingValue& value) {
  if (const auto* integer = std::get_if<int64_t>(&value)) return static_cast<double>(*integer);
  if (const auto* number = std::get_if<double>(&value)) return *number;
  return 0;
}

std::string type_text(const SettingDef& setting) {
  switch (setting.type) {
    case SettingType::kBool:
      return "boolean";
    case SettingType::kInt:
      return setting.keyword.empty() ? "integer" : "integer \\| " + std::string(setting.keyword);
    case SettingType::kNumber:
      return "number";
    case SettingType::kName:
      break;
  }
  std::vector<std::string> names(setting.choices.begin(), setting.choices.end());
  return join(names, " \\| ");
}

std::string range_text(const SettingDef& setting) {
  if (setting.type != SettingType::kInt && setting.type != SettingType::kNumber) return "";
  return (setting.exclusive_minimum ? "(" : "[") + number_text(setting.minimum) + ", " +
         number_text(setting.maximum) + (setting.exclusive_maximum ? ")" : "]");
}

}  // namespace

const SettingDef* find_setting(std::string_view key, bool list_key_too) {
  for (const auto& setting : settings_table()) {
    if (setting.key == key || (list_key_too && setting.axis && setting.list_key == key)) {
      return &setting;
    }
  }
  return nullptr;
}

SettingValue default_value(const SettingDef& setting) { return setting.get(CellSpec{}); }

std::string setting_text(const SettingValue& value) {
  if (const auto* flag = std::get_if<bool>(&value)) return *flag ? "true" : "false";
  if (const auto* integer = std::get_if<int64_t>(&value)) return std::to_string(*integer);
  if (const auto* number = std::get_if<double>(&value)) return number_text(*number);
  return std::get<std::string>(value);
}

std::string setting_text(const SettingDef& setting, const SettingValue& value) {
  if (!setting.keyword.empty() && std::holds_alternative<int64_t>(value) &&
      std::get<int64_t>(value) == setting.keyword_value) {
    return std::string(setting.keyword);
  }
  return setting_text(value);
}

std::optional<SettingValue> parse_setting_text(const SettingDef& setting, const std::string& text) {
  if (!setting.keyword.empty() && text == setting.keyword) {
    return SettingValue(setting.keyword_value);
  }
  switch (setting.type) {
    case SettingType::kBool:
      if (text == "true" || text == "True") return SettingValue(true);
      if (text == "false" || text == "False") return SettingValue(false);
      return std::nullopt;
    case SettingType::kInt: {
      const auto value = parse_decimal(text);
      if (!value) return std::nullopt;
      if (!setting.keyword.empty() && *value == setting.keyword_value) {
        return std::nullopt;  // write the keyword
      }
      return SettingValue(*value);
    }
    case SettingType::kNumber: {
      double value = 0;
      const char* end = text.data() + text.size();
      const auto [ptr, ec] = std::from_chars(text.data(), end, value);
      if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
        return std::nullopt;
      }
      return SettingValue(value);
    }
    case SettingType::kName:
      if (std::find(setting.choices.begin(), setting.choices.end(), text) ==
          setting.choices.end()) {
        return std::nullopt;
      }
      return SettingValue(text);
  }
  return std::nullopt;
}

std::string setting_value_problem(const SettingDef& setting, const SettingValue& value) {
  const std::string key(setting.key);
  const std::string example = setting_text(default_value(setting));
  if (setting.type == SettingType::kName) {
    const auto& name = std::get<std::string>(value);
    if (std::find(setting.choices.begin(), setting.choices.end(), name) != setting.choices.end()) {
      return "";
    }
    std::vector<std::string> names(setting.choices.begin(), setting.choices.end());
    return key + " '" + name + "' is unknown; use " + join(names, ", ");
  }
  if (setting.type == SettingType::kBool) return "";
  const double number = as_number(value);
  if (!setting.keyword.empty() && number == static_cast<double>(setting.keyword_value)) {
    return "";  // the keyword (batch_size auto)
  }
  const std::string unit = setting.unit.empty() ? "" : " " + std::string(setting.unit);
  const bool low =
      setting.exclusive_minimum ? !(number > setting.minimum) : !(number >= setting.minimum);
  if (low) {
    return key + " must be " + (setting.exclusive_minimum ? "> " : ">= ") +
           number_text(setting.minimum) + unit + "; use e.g. " + example;
  }
  if (setting.exclusive_maximum && !(number < setting.maximum)) {
    return key + " must be < " + number_text(setting.maximum) + unit + "; use e.g. " + example;
  }
  if (number > setting.maximum) {
    return key + " " + setting_text(value) + " is absurd (above " + number_text(setting.maximum) +
           "); use a smaller value, e.g. " + example;
  }
  return "";
}

nlohmann::json setting_json(const SettingValue& value) {
  return std::visit([](const auto& v) { return nlohmann::json(v); }, value);
}

std::optional<SettingValue> setting_from_json(const SettingDef& setting,
                                              const nlohmann::json& json) {
  switch (setting.type) {
    case SettingType::kBool:
      if (json.is_boolean()) return SettingValue(json.get<bool>());
      break;
    case SettingType::kInt:
      if (json.is_number_integer()) return SettingValue(json.get<int64_t>());
      if (json.is_string() && !setting.keyword.empty() &&
          json.get<std::string>() == setting.keyword) {
        return SettingValue(setting.keyword_value);
      }
      break;
    case SettingType::kNumber:
      if (json.is_number()) return SettingValue(json.get<double>());
      break;
    case SettingType::kName:
      if (json.is_string()) return parse_setting_text(setting, json.get<std::string>());
      break;
  }
  return std::nullopt;
}

nlohmann::json setting_value_schema(const SettingDef& setting) {
  nlohmann::json schema{{"description", std::string(setting.doc)}};
  switch (setting.type) {
    case SettingType::kBool:
      schema["type"] = "boolean";
      break;
    case SettingType::kInt:
    case SettingType::kNumber:
      schema["type"] = setting.type == SettingType::kInt ? "integer" : "number";
      // The inclusive minimum is the schema's ("too small"); exclusive bounds and the
      // maxima are checked by the expansion, which says what to write instead.
      if (!setting.exclusive_minimum) {
        schema["minimum"] = setting.type == SettingType::kInt
                                ? nlohmann::json(static_cast<int64_t>(setting.minimum))
                                : nlohmann::json(setting.minimum);
      }
      if (!setting.keyword.empty()) {  // an integer, or the keyword
        nlohmann::json number = schema;
        number.erase("description");
        schema.erase("type");
        schema.erase("minimum");
        schema["anyOf"] = {number, {{"type", "string"}, {"enum", {std::string(setting.keyword)}}}};
      }
      break;
    case SettingType::kName: {
      schema["type"] = "string";
      schema["enum"] = nlohmann::json::array();
      for (const auto choice : setting.choices) schema["enum"].push_back(std::string(choice));
      break;
    }
  }
  return schema;
}

std::string settings_reference_markdown() {
  std::string out =
      "| key | type | unit | default | range | axis | in cell id | what it sets |\n"
      "|---|---|---|---|---|---|---|---|\n";
  for (const auto& setting : settings_table()) {
    const std::string key = setting.axis ? "`" + std::string(setting.list_key) + "` (`" +
                                               std::string(setting.key) + "`)"
                                         : "`" + std::string(setting.key) + "`";
    const char* id = setting.id == IdRule::kAlways          ? "yes"
                     : setting.id == IdRule::kUnlessDefault ? "when not default"
                                                            : "no";
    out += "| " + key + " | " + type_text(setting) + " | " + std::string(setting.unit) + " | " +
           setting_text(default_value(setting)) + " | " + range_text(setting) + " | " +
           (setting.axis ? "yes" : "no") + " | " + id + " | " + std::string(setting.doc) + " |\n";
  }
  return out;
}

namespace {

/// Name of the schema definition "one value of `key`, or a list of them".
std::string values_definition(std::string_view key) { return std::string(key) + "_values"; }

/// "one value of `setting`, or a list of them", inlined (not a $ref) so that the error
/// messages of matrix_schema.cc find its type and enum; the description is what they say
/// is expected.
nlohmann::json one_or_list(const SettingDef& setting) {
  const nlohmann::json value = setting_value_schema(setting);
  static const std::map<SettingType, std::string> kWords{{SettingType::kBool, "true or false"},
                                                         {SettingType::kInt, "an integer"},
                                                         {SettingType::kNumber, "a number"},
                                                         {SettingType::kName, "a name"}};
  return {{"description", kWords.at(setting.type) + ", or a list of them"},
          {"anyOf",
           {value, {{"type", "array"}, {"minItems", 1}, {"uniqueItems", true}, {"items", value}}}}};
}

}  // namespace

void add_settings_to_schema(const std::string& file, nlohmann::json& schema) {
  using Json = nlohmann::json;
  const auto reference = [](const std::string& prefix, std::string_view name) {
    return Json{{"$ref", prefix + "#/definitions/" + std::string(name)}};
  };
  Json optimizer{{"description", "Training optimizer; unset fields keep their defaults."},
                 {"type", "object"},
                 {"additionalProperties", false},
                 {"properties", Json::object()}};
  Json optimizer_values = optimizer;
  optimizer_values["description"] =
      "Training optimizer; unset fields keep their defaults; a list sweeps a field.";
  constexpr std::string_view kOptimizer = "optimizer.";
  if (file == "experiment.schema.json") {
    Json& definitions = schema["definitions"];
    Json& properties = schema["properties"];
    for (const auto& setting : settings_table()) {
      if (setting.key.starts_with(kOptimizer)) {
        const std::string field(setting.key.substr(kOptimizer.size()));
        optimizer["properties"][field] = setting_value_schema(setting);
        optimizer_values["properties"][field] = one_or_list(setting);
        continue;
      }
      definitions[std::string(setting.key)] = setting_value_schema(setting);
      if (!setting.axis) {  // one value, or a list: Note [Every setting is an axis]
        definitions[values_definition(setting.key)] = one_or_list(setting);
        properties[std::string(setting.key)] = reference("", values_definition(setting.key));
        continue;
      }
      definitions[std::string(setting.list_key)] = {
          {"description", "list of: " + std::string(setting.doc)},
          {"type", "array"},
          {"minItems", 1},
          {"uniqueItems", true},
          {"items", reference("", setting.key)}};
      properties[std::string(setting.list_key)] = reference("", setting.list_key);
      if (setting.key == "mode") properties["mode"] = reference("", "mode");  // one mode
    }
    definitions["optimizer"] = optimizer;
    definitions["optimizer_values"] = optimizer_values;
    properties["optimizer"] = reference("", "optimizer_values");
  } else if (file == "matrix.schema.json") {
    const std::string prefix = "experiment.schema.json";
    Json& defaults = schema["properties"]["defaults"]["properties"];
    Json& sweep = schema["properties"]["sweep"]["properties"];
    Json& exclude = schema["properties"]["exclude"]["items"]["properties"];
    Json& tree = schema["definitions"]["tree_experiment"]["properties"];
    for (const auto& setting : settings_table()) {
      if (setting.key.starts_with(kOptimizer)) {
        exclude[std::string(setting.key)] = setting_value_schema(setting);
        continue;
      }
      exclude[std::string(setting.key)] = reference(prefix, setting.key);
      if (setting.axis) {
        sweep[std::string(setting.list_key)] = reference(prefix, setting.list_key);
        tree[std::string(setting.list_key)] = reference(prefix, setting.list_key);
        if (setting.key == "mode") tree["mode"] = reference(prefix, "mode");
      } else {  // Note [Every setting is an axis]: a list under sweep sweeps it
        defaults[std::string(setting.key)] = reference(prefix, setting.key);
        sweep[std::string(setting.key)] = reference(prefix, values_definition(setting.key));
        tree[std::string(setting.key)] = reference(prefix, values_definition(setting.key));
      }
    }
    defaults["optimizer"] = reference(prefix, "optimizer");
    sweep["optimizer"] = reference(prefix, "optimizer_values");
    tree["optimizer"] = reference(prefix, "optimizer_values");
  }
}

}  // namespace scalebench
