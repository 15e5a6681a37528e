// The settings of a cell, each defined once in one table (common/cell/settings_table.cc).
//
// Note [Settings table]
// ~~~~~~~~~~~~~~~~~~~~~
// A setting is a value of CellSpec that a matrix file may set in `defaults`, `sweep` or an
// experiment (batch size, precision, warm-up, bucket size, TF32, ...). Its row in the table
// says its YAML key, its JSON key in the cell spec, its type, unit, range, one doc line,
// whether it is an axis (a list whose values each make their own cells) and how it enters
// the cell id, and gives a getter and a setter on CellSpec. Everything else is driven by the
// table and written nowhere else:
//   * the YAML reader (matrix_yaml.cc) and the branch-tree overlay (tree_experiments.cc),
//   * the expansion with its range checks (matrix_expand.cc) and the exclude rules,
//   * the CytoDL override mapping `scalebench.<key>=<value>` (matrix_cytodl.cc),
//   * the cell spec's JSON and so its id (cell_spec.cc),
//   * the JSON Schema entries of the settings (added to schemas/*.json when loaded,
//     matrix_schema.cc), and the settings table of docs/matrix-reference.md (kept in sync
//     by tests/unit/common/settings_table_test.cc).
// Adding a setting: a field in CellSpec (common/cell/cell_spec.h), a row in the table, and the
// code that uses it (worker/); then regenerate the docs table (see the test).
//
// Experiment-level values (model, input_shape, num_classes, data, checkpoint, name,
// prepare) are not settings: they describe what is benchmarked and have their own keys.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/cell/cell_spec.h"

namespace scalebench {

enum class SettingType { kBool, kInt, kNumber, kName };

/// A setting's value: bool, int64 (kInt), double (kNumber) or a name (kName: an enum's
/// text, e.g. "fp16", or a free name such as the optimizer's).
using SettingValue = std::variant<bool, int64_t, double, std::string>;

/// How a setting enters the cell id (Note [Cell identity]).
enum class IdRule {
  kAlways,         ///< always in the canonical JSON
  kUnlessDefault,  ///< only when it differs from the default: a setting added later keeps
                   ///< the ids of every earlier cell (their value is the default)
  kNever,          ///< not part of what is measured (bookkeeping)
};

struct SettingDef {
  std::string_view key;       ///< YAML key of a single value; exclude key; `scalebench.<key>`
  std::string_view list_key;  ///< axis only: YAML key of its list ("batch_sizes"), else ""
  std::string_view json_key;  ///< key in the cell spec's JSON; '.' nests ("optimizer.lr")
  SettingType type = SettingType::kBool;
  std::string_view unit;  ///< "s", "bytes", "" (a count or no unit)
  /// kInt/kNumber: the accepted range. Values outside are input errors.
  double minimum = 0;
  double maximum = 0;
  bool exclusive_minimum = false;         ///< the minimum itself is refused (timeout_s > 0)
  bool exclusive_maximum = false;         ///< the maximum itself is refused (momentum < 1)
  std::vector<std::string_view> choices;  ///< kName: the accepted names
  /// kInt only: a word accepted in place of a number and stored as `keyword_value`
  /// (batch_size: "auto", kBatchAuto); "" for none.
  std::string_view keyword;
  /// The stored value of `keyword` (0 for batch_size and iterations; -1 for warmup, whose 0
  /// means "no warm-up").
  int64_t keyword_value = 0;
  std::string_view doc;  ///< one line for the schema and the docs
  bool axis = false;     ///< a list in `sweep`/experiments; each value makes its own cells
  IdRule id = IdRule::kAlways;
  SettingValue (*get)(const CellSpec&) = nullptr;
  void (*set)(CellSpec&, const SettingValue&) = nullptr;
};

/// The table, in the order of the docs; the axes in their expansion order (outermost first).
const std::vector<SettingDef>& settings_table();

/// The row whose key (or, when `list_key_too`, list key) is `key`; nullptr when none.
const SettingDef* find_setting(std::string_view key, bool list_key_too = false);

/// The default: the value of a default-constructed CellSpec (Note [Matrix defaults]).
SettingValue default_value(const SettingDef& setting);

/// Text of a value as a user writes it: true, 16, 0.01, fp16.
std::string setting_text(const SettingValue& value);
/// The same, with `setting`'s keyword for 0 ("auto" for batch_size 0).
std::string setting_text(const SettingDef& setting, const SettingValue& value);

/// A value of `setting`'s type read from `text` (CytoDL overrides): std::nullopt when it is
/// not one (an unknown name included). Ranges are not checked here.
std::optional<SettingValue> parse_setting_text(const SettingDef& setting, const std::string& text);

/// Why `value` is outside `setting`'s range or choices ("" when it is inside): a message that
/// names the key and says what to write instead.
std::string setting_value_problem(const SettingDef& setting, const SettingValue& value);

/// JSON of a value and back (nullopt when `json` does not hold one of the setting's type).
nlohmann::json setting_json(const SettingValue& value);
std::optional<SettingValue> setting_from_json(const SettingDef& setting,
                                              const nlohmann::json& json);

/// The JSON Schema (draft 7) of one value of `setting`, with its doc line as description.
nlohmann::json setting_value_schema(const SettingDef& setting);

/// Adds the settings to a schema file of schemas/ as it is loaded: for
/// "experiment.schema.json" a definition per setting (and per axis list) and the
/// experiment's properties; for "matrix.schema.json" the properties of `defaults`, `sweep`,
/// `exclude` rules and tree experiment entries. Other files are left as they are.
void add_settings_to_schema(const std::string& file, nlohmann::json& schema);

/// The settings table of docs/matrix-reference.md (Markdown, one row per setting).
std::string settings_reference_markdown();

}  // namespace scalebench
