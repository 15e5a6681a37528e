#include "matrix/yaml_node_reader.h"

namespace scalebench {
namespace {

/// A typed read as a setting value.
template <typename T>
std::optional<SettingValue> as_value(const std::optional<T>& value) {
  return value ? std::optional<SettingValue>(SettingValue(*value)) : std::nullopt;
}

}  // namespace

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::optional<SettingValue> YamlNodeReader::setting_value(const SettingDef& setting,
                                                          const YAML::Node& node,
                                                          const std::string& path) {
  switch (setting.type) {
    case SettingType::kBool:
      return as_value(scalar<bool>(node, path, "true or false"));
    case SettingType::kInt:
      if (!setting.keyword.empty() && node.IsScalar() && node.Scalar() == setting.keyword) {
        return SettingValue(setting.keyword_value);  // batch_size: auto (kBatchAuto)
      }
      return as_value(scalar<int64_t>(node, path, "an integer"));
    case SettingType::kNumber:
      return as_value(scalar<double>(node, path, "a number"));
    case SettingType::kName: {
      const auto text = scalar<std::string>(node, path, "a name");
      return text ? parse_setting_text(setting, *text) : std::nullopt;  // schema: enum
    }
  }
  return std::nullopt;
}

void YamlNodeReader::setting(const SettingDef& setting, bool as_list, const YAML::Node& node,
                             const std::string& path, SettingsRequest& out) {
  std::vector<SettingValue> values;
  if (as_list) {
    if (!node.IsSequence()) {
      diagnostics_.error(where(node, path), "expected a list, got " + describe_node(node));
      return;
    }
    for (size_t i = 0; i < node.size(); ++i) {
      auto value = setting_value(setting, node[i], path + "[" + std::to_string(i) + "]");
      if (!value) return;
      values.push_back(std::move(*value));
    }
    check_repeats(values, where(node, path), diagnostics_);
  } else {
    auto value = setting_value(setting, node, path);
    if (!value) return;
    values.push_back(std::move(*value));
  }
  out.values[std::string(setting.key)] = {std::move(values), where(node, path)};
}

void YamlNodeReader::settings(const YAML::Node& map, const std::string& path, SettingsRequest& out,
                              bool lists) {
  for (const auto& entry : map) {
    const std::string key = entry.first.Scalar();
    const YAML::Node& node = entry.second;
    const std::string at = child_path(path, key);
    if (key == "optimizer" && node.IsMap()) {  // optimizer.<field> settings, nested
      for (const auto& field : node) {
        const std::string name = "optimizer." + field.first.Scalar();
        if (const auto* def = find_setting(name)) {
          setting(*def, lists && field.second.IsSequence(), field.second,
                  child_path(at, field.first.Scalar()), out);
        }
      }
      continue;
    }
    if (const auto* def = find_setting(key, true)) {
      // An axis is a list under its list key ("modes"); its single key ("mode") is one value.
      // Any other setting is a list where lists are allowed and one is written.
      const bool as_list = def->axis ? key == def->list_key : lists && node.IsSequence();
      setting(*def, as_list, node, at, out);
    }
  }
}

}  // namespace scalebench
