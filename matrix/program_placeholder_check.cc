#include "matrix/program_placeholder_check.h"

#include <stdexcept>

#include "common/cell/program.h"
#include "common/cell/settings.h"
#include "matrix/schema.h"

namespace scalebench {
namespace {

void check_scalar(const YAML::Node& node, const std::string& path, const std::string& file,
                  Diagnostics& diagnostics) {
  if (!node || !node.IsScalar()) return;
  const std::string& text = node.Scalar();
  try {
    for (const auto& name : placeholder_names(text)) {
      if (is_program_placeholder(name)) continue;
      diagnostics.error(location_of(node, file, path), unknown_placeholder_message(name, text));
    }
  } catch (const std::invalid_argument& error) {
    diagnostics.error(location_of(node, file, path), error.what());
  }
}

void check_items(const YAML::Node& list, const std::string& path, const std::string& file,
                 Diagnostics& diagnostics) {
  if (!list || !list.IsSequence()) return;
  for (size_t i = 0; i < list.size(); ++i) {
    check_scalar(list[i], path + "[" + std::to_string(i) + "]", file, diagnostics);
  }
}

}  // namespace

std::vector<std::string> known_program_placeholders() {
  std::vector<std::string> names = kProgramPlaceholders;
  for (const auto& setting : settings_table()) names.emplace_back(setting.key);
  return names;
}

std::string unknown_placeholder_message(const std::string& name, const std::string& text) {
  const std::string suggestion = closest_match(name, known_program_placeholders());
  return "unknown placeholder {" + name + "} in '" + text + "'; use a setting's key or one of " +
         join(kProgramPlaceholders) +
         (suggestion.empty() ? "" : "; did you mean {" + suggestion + "}?");
}

void check_program_placeholders(const YAML::Node& program, const std::string& at,
                                const std::string& file, Diagnostics& diagnostics) {
  if (!program || !program.IsMap()) return;
  check_items(program["command"], at + ".command", file, diagnostics);
  check_items(program["preflight"], at + ".preflight", file, diagnostics);
  if (const YAML::Node env = program["env"]; env && env.IsMap()) {
    for (const auto& entry : env) {
      check_scalar(entry.second, at + ".env." + entry.first.Scalar(), file, diagnostics);
    }
  }
}

void check_matrix_program_placeholders(const YAML::Node& root, const std::string& file,
                                       Diagnostics& diagnostics) {
  const YAML::Node experiments = root["experiments"];
  if (!experiments || !experiments.IsSequence()) return;
  for (size_t i = 0; i < experiments.size(); ++i) {
    if (!experiments[i].IsMap()) continue;
    check_program_placeholders(experiments[i]["program"],
                               "experiments[" + std::to_string(i) + "].program", file, diagnostics);
  }
}

}  // namespace scalebench
