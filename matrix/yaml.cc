// YAML matrix reader: syntax checks, duplicate keys, schema, then typed extraction into a
// MatrixRequest. See docs/matrix-reference.md for the format.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/cell/settings.h"
#include "matrix/git_repo.h"
#include "matrix/program_placeholder_check.h"
#include "matrix/request.h"
#include "matrix/schema.h"
#include "matrix/text.h"
#include "matrix/tree_experiments.h"
#include "matrix/yaml_node_reader.h"

namespace scalebench {
namespace {

/// Adds an error for each key that appears twice in one mapping (yaml-cpp keeps both).
void check_duplicate_keys(const YAML::Node& node, const std::string& path, const std::string& file,
                          Diagnostics& diagnostics) {
  if (node.IsMap()) {
    std::map<std::string, YAML::Mark> seen;
    for (const auto& entry : node) {
      const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
      const auto [previous, inserted] = seen.emplace(key, entry.first.Mark());
      if (!inserted) {
        diagnostics.error(location_of(entry.first, file, child_path(path, key)),
                          "duplicate key (first written on line " +
                              std::to_string(previous->second.line + 1) +
                              "); keep only one of the two");
      }
      check_duplicate_keys(entry.second, child_path(path, key), file, diagnostics);
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      check_duplicate_keys(node[i], path + "[" + std::to_string(i) + "]", file, diagnostics);
    }
  }
}

/// `prepare` and `prepare_timeout_s` of `map` (the top level or an experiment).
void read_prepare(const YAML::Node& map, const std::string& path, YamlNodeReader& reader,
                  Setting<std::vector<std::string>>& argv, Setting<double>& timeout_s) {
  if (const auto node = map["prepare"]) {
    const std::string at = child_path(path, "prepare");
    reader.set(argv, reader.list<std::string>(node, at, "arguments"), node, at);
  }
  if (const auto node = map["prepare_timeout_s"]) {
    const std::string at = child_path(path, "prepare_timeout_s");
    reader.set(timeout_s, reader.scalar<double>(node, at, "a number"), node, at);
  }
}

/// `preflight` and `preflight_timeout_s` of a program (Note [Program preflight] in
/// program/preflight/program_preflight.h): `none`, `hydra` or an argv template; schema-checked.
void read_preflight(const YAML::Node& program, const std::string& at, YamlNodeReader& reader,
                    PreflightSpec& preflight) {
  if (const YAML::Node node = program["preflight"]; node && node.IsSequence()) {
    preflight.kind = PreflightKind::kCommand;
    preflight.command =
        reader.list<std::string>(node, at + ".preflight", "strings").value_or(preflight.command);
  } else if (node) {
    const auto kind = reader.scalar<std::string>(node, at + ".preflight", "none or hydra");
    preflight.kind = kind == "hydra" ? PreflightKind::kHydra : PreflightKind::kNone;
  }
  if (const YAML::Node node = program["preflight_timeout_s"]) {
    preflight.timeout_s = reader.scalar<double>(node, at + ".preflight_timeout_s", "a number")
                              .value_or(preflight.timeout_s);
  }
}

/// `program:` (docs/programs.md): command, env, python and preflight, schema-checked before.
ProgramSpec read_program(const YAML::Node& program, const std::string& at, YamlNodeReader& reader) {
  ProgramSpec spec;
  if (auto command = reader.list<std::string>(program["command"], at + ".command", "strings")) {
    spec.command = *command;
  }
  if (const YAML::Node python = program["python"]) {
    // A relative path is the file's folder's (like repo:): a virtualenv is rarely tracked,
    // so it is not in a branch's worktree.
    std::string text = reader.scalar<std::string>(python, at + ".python", "a path").value_or("");
    if (text.find('/') != std::string::npos && !std::filesystem::path(text).is_absolute()) {
      text = (std::filesystem::absolute(reader.file()).parent_path() / text)
                 .lexically_normal()
                 .string();
    }
    spec.python = text;
  }
  if (const YAML::Node env = program["env"]; env && env.IsMap()) {
    for (const auto& entry : env) {
      spec.env[entry.first.Scalar()] =
          reader.scalar<std::string>(entry.second, at + ".env." + entry.first.Scalar(), "text")
              .value_or("");
    }
  }
  read_preflight(program, at, reader, spec.preflight);
  return spec;
}

/// Reads the keys present in `node` into `experiment`; absent keys leave it unchanged.
void read_experiment_keys(const YAML::Node& node, const std::string& path, YamlNodeReader& reader,
                          Diagnostics& diagnostics, ExperimentRequest& experiment) {
  for (const auto& entry : node) experiment.written_keys.insert(entry.first.Scalar());
  reader.settings(node, path, experiment.settings, true);
  read_prepare(node, path, reader, experiment.prepare_argv, experiment.prepare_timeout_s);
  if (node["mode"] && node["modes"]) {
    diagnostics.error(reader.where(node["modes"], child_path(path, "modes")),
                      "both mode and modes are set; keep one of them");
  }
  if (const YAML::Node model = node["model"]) {
    const std::string at = child_path(path, "model");
    experiment.model_where = reader.where(model, at);
    experiment.model = ModelSpec{};
    if (model.IsMap() && model["aoti"]) {
      experiment.model.aoti =
          reader.scalar<std::string>(model["aoti"], at + ".aoti", "a path").value_or("");
    } else if (model.IsMap() && model["replay"]) {
      experiment.model.replay =
          reader.scalar<std::string>(model["replay"], at + ".replay", "a path").value_or("");
    } else if (model.IsMap()) {
      experiment.model.torchscript =
          reader.scalar<std::string>(model["torchscript"], at + ".torchscript", "a path")
              .value_or("");
    } else {
      experiment.model.zoo = reader.scalar<std::string>(model, at, "a model name").value_or("");
    }
  }
  if (const YAML::Node program = node["program"]) {
    const std::string at = child_path(path, "program");
    experiment.program_where = reader.where(program, at);
    experiment.program = read_program(program, at, reader);
  }
  if (const auto name = node["name"]) {
    experiment.name =
        reader.scalar<std::string>(name, child_path(path, "name"), "a name").value_or("");
  }
  if (const auto shape = node["input_shape"]) {
    const std::string at = child_path(path, "input_shape");
    if (auto dims = reader.list<int64_t>(shape, at, "integers"); dims && !dims->empty()) {
      reader.set(experiment.input_shape, dims, shape, at);
    }
  }
  if (const auto classes = node["num_classes"]) {
    const std::string at = child_path(path, "num_classes");
    const auto value = reader.scalar<int64_t>(classes, at, "an integer");
    if (value && *value > 0) reader.set(experiment.num_classes, value, classes, at);
  }
  if (const auto data = node["data"]) {
    experiment.data = DataSpec{};
    if (data.IsMap()) {
      experiment.data.kind = "hdf5";
      experiment.data.path =
          reader.scalar<std::string>(data["hdf5"], child_path(path, "data.hdf5"), "a path")
              .value_or("");
      experiment.data.inputs = data["inputs"] ? data["inputs"].Scalar() : "inputs";
      experiment.data.targets = data["targets"] ? data["targets"].Scalar() : "targets";
    }
  }
  if (const auto checkpoint = node["checkpoint"]) {
    experiment.checkpoint =
        reader.scalar<std::string>(checkpoint, child_path(path, "checkpoint"), "a path")
            .value_or("");
  }
}

/// An inline entry of `experiments` (or a tree experiment file: `path` ""). The schema
/// has checked that `model` is present.
ExperimentRequest read_experiment(const YAML::Node& node, const std::string& path,
                                  YamlNodeReader& reader, Diagnostics& diagnostics) {
  ExperimentRequest experiment;
  experiment.where = reader.where(node, path);
  read_experiment_keys(node, path, reader, diagnostics, experiment);
  if (!node["name"]) {
    const auto& model_spec = experiment.model;
    experiment.name = !model_spec.zoo.empty() ? model_spec.zoo
                      : !model_spec.aoti.empty()
                          ? std::filesystem::path(model_spec.aoti).stem().string()
                      : !model_spec.replay.empty()
                          ? std::filesystem::path(model_spec.replay).stem().string()
                          : std::filesystem::path(model_spec.torchscript).stem().string();
  }
  return experiment;
}

/// An entry `{experiment: <name>, ...overrides}` of `experiments` (see
/// matrix/tree_experiments.h): the overrides are read now, the file by plan/run.
ExperimentRequest read_tree_entry(const YAML::Node& node, const std::string& path,
                                  YamlNodeReader& reader, Diagnostics& diagnostics) {
  ExperimentRequest experiment;
  experiment.where = reader.where(node, path);
  const std::string at = child_path(path, "experiment");
  experiment.tree_where = reader.where(node["experiment"], at);
  experiment.tree_name =
      reader.scalar<std::string>(node["experiment"], at, "an experiment name").value_or("");
  if (const auto problem = tree_experiment_name_problem(experiment.tree_name); !problem.empty()) {
    diagnostics.error(experiment.tree_where,
                      "experiment name '" + experiment.tree_name + "' is refused: it " + problem +
                          "; write the file's path below configs/experiment/ without .yaml, "
                          "e.g. im2im/segmentation");
  }
  read_experiment_keys(node, path, reader, diagnostics, experiment);
  experiment.written_keys.erase("experiment");
  if (!node["name"]) experiment.name = experiment.tree_name;
  return experiment;
}

ExcludeRule read_exclude(const YAML::Node& node, const std::string& path, YamlNodeReader& reader) {
  ExcludeRule rule;
  rule.where = reader.where(node, path);
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    const std::string at = path + "." + key;
    if (key == "experiment") {
      rule.experiment = reader.scalar<std::string>(entry.second, at, "a name");
    } else if (key == "branch") {
      rule.branch = reader.scalar<std::string>(entry.second, at, "a branch");
    } else if (const auto* def = find_setting(key)) {
      if (auto value = reader.setting_value(*def, entry.second, at)) {
        rule.settings[key] = std::move(*value);
      }
    }
  }
  return rule;
}

/// A prepare step runs in a branch's worktree and a tree experiment is read from a branch's
/// tree: without repo/branches there is none.
void check_needs_branches(const MatrixRequest& request, Diagnostics& diagnostics) {
  if (!request.branches.empty()) return;
  for (const auto& experiment : request.experiments) {
    if (experiment.tree_name.empty()) continue;
    diagnostics.error(experiment.tree_where,
                      "experiment: " + experiment.tree_name + " reads configs/experiment/" +
                          experiment.tree_name +
                          ".yaml from each branch's tree and needs repo and branches; add "
                          "repo: <path> and branches: [<ref>, ...], or write the experiment "
                          "inline (model: ...)");
  }
  std::vector<SourceLocation> places;
  if (request.prepare_argv.value) places.push_back(request.prepare_argv.where);
  for (const auto& experiment : request.experiments) {
    if (experiment.prepare_argv.value) places.push_back(experiment.prepare_argv.where);
  }
  for (const auto& where : places) {
    diagnostics.error(where,
                      "prepare runs in a branch's worktree and needs repo and branches; add "
                      "repo: <path> and branches: [<ref>, ...], or remove prepare");
  }
}

/// `baseline: reference`, or `baseline: {branch: <one of branches>, metrics: [name, ...]}`
/// (either key may be left out; no branch = reference). Note [Accuracy across cells].
void read_baseline(const YAML::Node& root, YamlNodeReader& reader, MatrixRequest& request,
                   Diagnostics& diagnostics) {
  const YAML::Node node = root["baseline"];
  if (!node) return;
  if (node.IsScalar()) {
    if (node.Scalar() != "reference") {
      diagnostics.error(reader.where(node, "baseline"),
                        "baseline '" + node.Scalar() +
                            "' is not `reference`; write baseline: {branch: " + node.Scalar() +
                            "} to compare with the cells of a branch, or baseline: "
                            "reference for the same branch in fp32 without switches");
    }
    return;
  }
  if (const auto branch = node["branch"]) {
    request.baseline.branch =
        reader.scalar<std::string>(branch, "baseline.branch", "a branch").value_or("");
    if (std::find(request.branches.begin(), request.branches.end(), request.baseline.branch) ==
        request.branches.end()) {
      std::string known;
      for (const auto& name : request.branches) known += (known.empty() ? "" : ", ") + name;
      diagnostics.error(reader.where(branch, "baseline.branch"),
                        "baseline branch '" + request.baseline.branch +
                            "' is not one of the matrix's branches (" +
                            (known.empty() ? "none: add repo and branches" : known) +
                            "); name one of them, or write baseline: reference");
    }
  }
  if (const auto metrics = node["metrics"]) {
    request.baseline.metrics = reader.list<std::string>(metrics, "baseline.metrics", "metric names")
                                   .value_or(std::vector<std::string>{});
  }
}

void read_top_level(const YAML::Node& root, YamlNodeReader& reader, MatrixRequest& request,
                    Diagnostics& diagnostics) {
  if (root["name"])
    request.name = reader.scalar<std::string>(root["name"], "name", "a name").value_or("");
  if (root["repo"])
    request.repo = reader.scalar<std::string>(root["repo"], "repo", "a path or URL").value_or("");
  if (root["scheduling"]) request.scheduling = root["scheduling"].Scalar();
  if (const auto branches = root["branches"]) {
    request.branches =
        reader.list<std::string>(branches, "branches", "refs").value_or(std::vector<std::string>{});
    check_repeats(request.branches, reader.where(branches, "branches"), diagnostics);
    if (branches.IsSequence()) {
      for (size_t i = 0; i < branches.size() && i < request.branches.size(); ++i) {
        request.branch_where.push_back(
            reader.where(branches[i], "branches[" + std::to_string(i) + "]"));
      }
    }
    for (size_t i = 0; i < request.branches.size(); ++i) {
      const std::string path = "branches[" + std::to_string(i) + "]";
      if (const auto problem = ref_syntax_problem(request.branches[i]); !problem.empty()) {
        diagnostics.error(reader.where(branches[i], path),
                          "ref '" + request.branches[i] + "' is refused: it " + problem +
                              "; write a branch, tag or full commit id");
      }
    }
    if (request.repo.empty()) {
      diagnostics.error(reader.where(branches, "branches"),
                        "branches need a repo; add repo: <path or URL>");
    }
  } else if (!request.repo.empty()) {
    diagnostics.error(reader.where(root["repo"], "repo"),
                      "repo without branches; add branches: [<ref>, ...]");
  }
  read_prepare(root, "", reader, request.prepare_argv, request.prepare_timeout_s);
  read_baseline(root, reader, request, diagnostics);
  if (root["defaults"]) reader.settings(root["defaults"], "defaults", request.defaults, false);
  if (root["sweep"]) {
    SettingsRequest sweep;
    reader.settings(root["sweep"], "sweep", sweep, true);
    for (auto& [key, value] : sweep.values) {
      if (request.defaults.values.contains(key)) {
        diagnostics.error(value.where, key +
                                           " is set in both defaults and sweep; keep one of "
                                           "them (a list under sweep, or one value under "
                                           "defaults)");
        continue;
      }
      request.defaults.values[key] = std::move(value);
    }
  }
}

/// The text's YAML document after scalebench's own indentation and quote checks, or nullopt
/// with the problems in `diagnostics` (a syntax error located at its line and column).
std::optional<YAML::Node> parse_yaml_text(const std::string& text, const std::string& file,
                                          Diagnostics& diagnostics) {
  check_yaml_indentation(text, file, diagnostics);
  check_yaml_quotes(text, file, diagnostics);
  if (diagnostics.has_errors()) return std::nullopt;
  try {
    // See Note [Input limits]: the bounds hold before the node tree is built.
    if (!check_yaml_structure(text, file, diagnostics)) return std::nullopt;
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    diagnostics.error({file, e.mark.line + 1, e.mark.column + 1, ""},
                      "YAML syntax error: " + e.msg + "; fix the YAML syntax here");
    return std::nullopt;
  }
}

}  // namespace

MatrixRequest read_yaml_matrix(const std::string& text, const std::string& file,
                               Diagnostics& diagnostics) {
  MatrixRequest request;
  request.file = file;
  const auto parsed = parse_yaml_text(text, file, diagnostics);
  if (!parsed) return request;
  const YAML::Node& root = *parsed;
  if (!root.IsMap()) {
    diagnostics.error(
        location_of(root, file, ""),
        "the top level must be a mapping (key: value) with at least 'experiments'; got " +
            describe_node(root));
    return request;
  }
  check_duplicate_keys(root, "", file, diagnostics);
  validate_with_schema(root, "matrix.schema.json", file, diagnostics);
  check_matrix_program_placeholders(root, file, diagnostics);  // with the schema's, at once
  if (diagnostics.has_errors()) return request;
  YamlNodeReader reader(file, diagnostics);
  read_top_level(root, reader, request, diagnostics);
  std::map<std::string, int> names;
  const YAML::Node experiments = root["experiments"];
  for (size_t i = 0; i < experiments.size(); ++i) {
    const std::string path = "experiments[" + std::to_string(i) + "]";
    const bool from_tree = static_cast<bool>(experiments[i]["experiment"]);
    auto experiment = from_tree ? read_tree_entry(experiments[i], path, reader, diagnostics)
                                : read_experiment(experiments[i], path, reader, diagnostics);
    // A tree experiment's name may come from its file: checked per branch once read.
    if (from_tree && experiment.written_keys.count("name") == 0) {
      request.experiments.push_back(std::move(experiment));
      continue;
    }
    const auto [previous, inserted] = names.emplace(experiment.name, experiment.where.line);
    if (!inserted) {
      diagnostics.error(experiment.where, "experiment name '" + experiment.name +
                                              "' is already used on line " +
                                              std::to_string(previous->second) +
                                              "; give each experiment a unique name");
    }
    request.experiments.push_back(std::move(experiment));
  }
  check_needs_branches(request, diagnostics);
  if (const auto excludes = root["exclude"]) {
    for (size_t i = 0; i < excludes.size(); ++i) {
      request.excludes.push_back(
          read_exclude(excludes[i], "exclude[" + std::to_string(i) + "]", reader));
    }
  }
  return request;
}

namespace {

/// A YAML document of its own (an experiment file, a program template) after the encoding,
/// syntax, mapping, duplicate-key and schema checks; nullopt with the problems added.
/// `expected` says what the mapping must hold, for the message when it is not one.
std::optional<YAML::Node> checked_document(const std::string& text, const std::string& file,
                                           const char* schema_file, const std::string& expected,
                                           Diagnostics& diagnostics) {
  if (!check_text_encoding(text, file, diagnostics)) return std::nullopt;
  auto parsed = parse_yaml_text(text, file, diagnostics);
  if (!parsed) return std::nullopt;
  if (!parsed->IsMap()) {
    diagnostics.error(location_of(*parsed, file, ""), expected + "; got " + describe_node(*parsed));
    return std::nullopt;
  }
  check_duplicate_keys(*parsed, "", file, diagnostics);
  validate_with_schema(*parsed, schema_file, file, diagnostics);
  // An experiment file's `program:` is checked here; a program template's placeholders
  // include the CSV's own columns ({overrides}), known only per row: expansion checks those.
  if (std::string(schema_file) != "program-template.schema.json") {
    check_program_placeholders((*parsed)["program"], "program", file, diagnostics);
  }
  if (diagnostics.has_errors()) return std::nullopt;
  return parsed;
}

}  // namespace

std::optional<ProgramSpec> read_program_template(const std::string& text, const std::string& file,
                                                 Diagnostics& diagnostics) {
  const auto root = checked_document(
      text, file, "program-template.schema.json",
      "a program template must be a mapping with 'command' (and optionally 'env', 'python', "
      "'preflight' and 'preflight_timeout_s')",
      diagnostics);
  if (!root) return std::nullopt;
  YamlNodeReader reader(file, diagnostics);
  ProgramSpec program = read_program(*root, "program", reader);
  if (diagnostics.has_errors()) return std::nullopt;
  return program;
}

std::optional<ExperimentRequest> read_yaml_experiment(const std::string& text,
                                                      const std::string& file,
                                                      Diagnostics& diagnostics) {
  const auto root = checked_document(
      text, file, "experiment.schema.json",
      "an experiment file must be a mapping (key: value) with at least 'model'", diagnostics);
  if (!root) return std::nullopt;
  YamlNodeReader reader(file, diagnostics);
  ExperimentRequest experiment = read_experiment(*root, "", reader, diagnostics);
  if (diagnostics.has_errors()) return std::nullopt;
  return experiment;
}

}  // namespace scalebench
