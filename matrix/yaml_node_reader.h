// Typed reads of a matrix's schema-checked YAML nodes, each error located at its node: the
// reader behind matrix/yaml.cc (the matrix, experiment files, program templates).
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/base/diagnostics.h"
#include "common/cell/settings.h"
#include "matrix/request.h"
#include "matrix/schema.h"

namespace scalebench {

/// "parent.key", or "key" at the top level: the path of a node in messages.
std::string child_path(const std::string& parent, const std::string& key);

/// Adds an error at `node` (a list) when two of `values` are equal, naming the first
/// repeat. The JSON Schema's uniqueItems is not used for this (see SchemaDocuments in
/// matrix/schema.cc): O(n log n), one error per list.
template <typename T>
void check_repeats(const std::vector<T>& values, const SourceLocation& where,
                   Diagnostics& diagnostics) {
  std::map<T, size_t> first;
  for (size_t i = 0; i < values.size(); ++i) {
    const auto [previous, inserted] = first.emplace(values[i], i);
    if (!inserted) {
      diagnostics.error(where, "the list has a repeated value (entries [" +
                                   std::to_string(previous->second) + "] and [" +
                                   std::to_string(i) + "]); remove the repeat");
      return;
    }
  }
}

/// Typed reads of schema-checked nodes. The yaml-cpp schema adapter is weakly typed (it
/// takes a list where a string is required), so each read still checks the node's kind.
class YamlNodeReader {
 public:
  YamlNodeReader(std::string file, Diagnostics& diagnostics)
      : file_(std::move(file)), diagnostics_(diagnostics) {}

  [[nodiscard]] const std::string& file() const { return file_; }

  SourceLocation where(const YAML::Node& node, const std::string& path) const {
    return location_of(node, file_, path);
  }

  template <typename T>
  std::optional<T> scalar(const YAML::Node& node, const std::string& path, const char* expected) {
    if (!node.IsScalar()) {
      diagnostics_.error(where(node, path),
                         std::string("expected ") + expected + ", got " + describe_node(node));
      return std::nullopt;
    }
    try {
      return node.as<T>();
    } catch (const YAML::Exception&) {
      diagnostics_.error(where(node, path),
                         std::string("expected ") + expected + ", got " + describe_node(node));
      return std::nullopt;
    }
  }

  template <typename T>
  std::optional<std::vector<T>> list(const YAML::Node& node, const std::string& path,
                                     const char* expected) {
    if (!node.IsSequence()) {
      diagnostics_.error(where(node, path), std::string("expected a list of ") + expected +
                                                ", got " + describe_node(node));
      return std::nullopt;
    }
    std::vector<T> values;
    for (size_t i = 0; i < node.size(); ++i) {
      auto value = scalar<T>(node[i], path + "[" + std::to_string(i) + "]", expected);
      if (!value) return std::nullopt;
      values.push_back(*value);
    }
    return values;
  }

  /// One value of `setting` (the schema has checked it; this re-checks the node's kind).
  std::optional<SettingValue> setting_value(const SettingDef& setting, const YAML::Node& node,
                                            const std::string& path);

  /// Writes the setting at `node` into `out`: a list for an axis's list key, else one value.
  void setting(const SettingDef& setting, bool as_list, const YAML::Node& node,
               const std::string& path, SettingsRequest& out);

  template <typename T>
  void set(Setting<T>& setting, const std::optional<T>& value, const YAML::Node& node,
           const std::string& path) {
    if (!value) return;
    setting.value = value;
    setting.where = where(node, path);
  }

  /// The settings of `map` (defaults, sweep or an experiment). With `lists` (sweep and
  /// experiments) any setting may be a list: its values become an axis of the cells (Note
  /// [Every setting is an axis] in matrix/expand.cc).
  void settings(const YAML::Node& map, const std::string& path, SettingsRequest& out, bool lists);

 private:
  std::string file_;
  Diagnostics& diagnostics_;
};

}  // namespace scalebench
