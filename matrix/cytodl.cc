// CytoDL task CSV reader: maps each row of a training or inference task file to one
// experiment entry of a MatrixRequest. The mapping table is in docs/matrix-reference.md.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "common/base/decimal.h"
#include "common/cell/program.h"
#include "common/cell/settings.h"
#include "common/cell/zoo_names.h"
#include "matrix/csv.h"
#include "matrix/git_repo.h"
#include "matrix/request.h"
#include "matrix/text.h"

namespace scalebench {

// Note [CytoDL program rows]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A task CSV alone maps each row to a built-in stand-in model (im2im/* -> unet3d), the same
// code on every branch; validate, plan and run warn so. With a program template next to it
// (`<stem>.program.yaml`: `command`, `env`, `python` as an experiment's `program:`), each
// row runs that program instead, in its branch's tree: the real `train.py`. Before the
// cell's own placeholders, the row's columns fill `{trainer}`, `{max_epochs}` (training),
// `{checkpoint_path}` and `{data_path}` (inference), and an argv element that is exactly
// `{overrides}` becomes the row's overrides, one element each, as Hydra takes them.
// The overrides scalebench understands still set the cell (precision, device, seed,
// `scalebench.*` settings); of those, `scalebench.*` and `trainer.devices`/`num_nodes` are
// not passed on (the world size is the cell's: the template passes
// `trainer.devices={local_world_size} trainer.num_nodes={num_nodes}`), the others are.
// Any other override goes to the program as it is written. `max_epochs` is the program's
// business then, not the number of measured iterations.

namespace {

/// The program template next to a task file: `<folder>/<stem>.program.yaml`.
std::filesystem::path program_template_path(const std::string& file) {
  const std::filesystem::path path(file);
  return path.parent_path() / (path.stem().string() + ".program.yaml");
}

/// Overrides of a row that scalebench consumes without passing them on to a program.
bool consumed_only(const std::string& key) {
  return key.starts_with("scalebench.") || key == "trainer.devices" || key == "trainer.num_nodes";
}

const std::vector<std::string> kTrainHeader{"branch",     "experiment", "trainer",
                                            "max_epochs", "batch_size", "overrides"};
const std::vector<std::string> kInferHeader{"branch",  "experiment", "checkpoint_path", "data_path",
                                            "trainer", "batch_size", "overrides"};

/// CytoDL experiment configs with a zoo stand-in (3D image-to-image networks -> unet3d).
/// `im2im/labelfree` is the real config's name (cyto-dl 0.6.2); `im2im/label_free`, which
/// earlier task files used, is kept.
const std::map<std::string, std::string> kExperimentModels{
    {"im2im/segmentation", "unet3d"},
    {"im2im/labelfree", "unet3d"},
    {"im2im/label_free", "unet3d"},
};

/// The overrides a row may carry: Lightning/Hydra keys with a scalebench meaning, and
/// `scalebench.<key>` for every setting of the settings table that is not an axis (the
/// axes come from the row's columns and the trainer keys).
std::vector<std::string> supported_overrides() {
  std::vector<std::string> keys{"trainer.precision",
                                "trainer.devices",
                                "trainer.num_nodes",
                                "trainer.accelerator",
                                "seed",
                                "data.inputs",
                                "data.targets",
                                "scalebench.model",
                                "scalebench.torchscript",
                                "scalebench.input_shape",
                                "scalebench.num_classes",
                                "scalebench.baseline.branch",
                                "scalebench.baseline.metrics"};
  for (const auto& setting : settings_table()) {
    if (!setting.axis) keys.push_back("scalebench." + std::string(setting.key));
  }
  return keys;
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

std::optional<Precision> lightning_precision(const std::string& text) {
  static const std::map<std::string, Precision> kNames{
      {"32", Precision::kFp32},   {"32-true", Precision::kFp32},
      {"16", Precision::kFp16},   {"16-mixed", Precision::kFp16},
      {"bf16", Precision::kBf16}, {"bf16-mixed", Precision::kBf16}};
  const auto found = kNames.find(text);
  return found == kNames.end() ? std::nullopt : std::optional(found->second);
}

std::optional<Device> trainer_device(const std::string& text) {
  if (text == "gpu" || text == "cuda" || text == "ddp") return Device::kCuda;
  if (text == "cpu") return Device::kCpu;
  if (text == "auto") return Device::kAuto;
  return std::nullopt;
}

/// "[1, 32, 64, 64]" -> {1, 32, 64, 64}: positive dimensions, 1 to 8 of them.
std::optional<std::vector<int64_t>> shape_list(const std::string& text) {
  const std::string inner = trim(text);
  if (inner.size() < 2 || inner.front() != '[' || inner.back() != ']') return std::nullopt;
  std::vector<int64_t> shape;
  std::string item;
  std::istringstream items(inner.substr(1, inner.size() - 2));
  while (std::getline(items, item, ',')) {
    const auto value = parse_decimal(trim(item));
    if (!value || *value < 1) return std::nullopt;
    shape.push_back(*value);
  }
  if (shape.empty() || shape.size() > 8) return std::nullopt;
  return shape;
}

/// Splits the overrides field at whitespace and at commas outside brackets/quotes.
std::vector<std::string> split_overrides(const std::string& text) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  char quote = 0;
  for (const char c : text) {
    if (quote) {
      if (c == quote) quote = 0;
      current += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      current += c;
    } else if (c == '[' || c == '{') {
      ++depth;
      current += c;
    } else if (c == ']' || c == '}') {
      --depth;
      current += c;
    } else if (depth == 0 && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',')) {
      if (!current.empty()) items.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) items.push_back(current);
  return items;
}

class RowReader {
 public:
  RowReader(const std::string& file, bool inference, Diagnostics& diagnostics,
            const std::optional<ProgramSpec>& program)
      : file_(file), inference_(inference), diagnostics_(diagnostics), program_(program) {}

  ExperimentRequest read(const CsvRecord& record) {
    const auto& header = inference_ ? kInferHeader : kTrainHeader;
    std::map<std::string, const CsvField*> fields;
    for (size_t i = 0; i < header.size(); ++i) fields[header[i]] = &record.fields[i];
    ExperimentRequest experiment;
    experiment.where = {file_, record.line, 1, ""};
    read_branch(*fields["branch"], experiment);
    read_experiment(*fields["experiment"], experiment);
    const CsvField& trainer = *fields["trainer"];
    if (const auto device = trainer_device(trim(trainer.value))) {
      put(experiment, "device", to_string(*device), trainer, "trainer");
    } else {
      error(trainer, "trainer",
            "unknown trainer '" + trainer.value + "'; use gpu, cuda, ddp, cpu or auto");
    }
    if (trim(fields["batch_size"]->value) == "auto") {  // Note [Batch search]
      put(experiment, "batch_size", kBatchAuto, *fields["batch_size"], "batch_size");
    } else if (const auto batch = positive(*fields["batch_size"], "batch_size")) {
      put(experiment, "batch_size", *batch, *fields["batch_size"], "batch_size");
    }
    const Mode mode = inference_ ? Mode::kInfer : Mode::kTrain;
    experiment.settings.values["mode"].value = std::vector<SettingValue>{to_string(mode)};
    if (inference_) {
      experiment.checkpoint = trim(fields["checkpoint_path"]->value);
      read_data(*fields["data_path"], experiment);
    } else if (program_ && trim(fields["max_epochs"]->value) == "-1") {
      // Lightning's "no epoch limit": the program's steps end the fit (Note [CytoDL program
      // rows]); a row without a template has no program to give it to.
    } else if (const auto epochs = positive(*fields["max_epochs"], "max_epochs");
               epochs && !program_) {
      put(experiment, "iterations", *epochs, *fields["max_epochs"], "max_epochs");
    }
    const auto passed = read_overrides(*fields["overrides"], experiment);
    if (program_) make_program_row(fields, passed, experiment);
    return experiment;
  }

 private:
  /// Note [CytoDL program rows]: the row runs the template with its columns filled in.
  void make_program_row(const std::map<std::string, const CsvField*>& fields,
                        const std::vector<std::string>& overrides, ExperimentRequest& experiment) {
    std::map<std::string, std::string> row;
    for (const char* column : {"trainer", "max_epochs", "checkpoint_path", "data_path"}) {
      if (const auto found = fields.find(column); found != fields.end()) {
        row[column] = trim(found->second->value);
      }
    }
    experiment.model = ModelSpec{};
    experiment.checkpoint.clear();  // the program reads its own files: {checkpoint_path}
    experiment.data = DataSpec{};
    experiment.program = *program_;
    experiment.program_where = experiment.where;
    experiment.program.command = row_argv(program_->command, "command", row, overrides);
    // Note [Program preflight]: a check of the user's own sees the row as the program does.
    experiment.program.preflight.command =
        row_argv(program_->preflight.command, "preflight", row, overrides);
    for (auto& [name, value] : experiment.program.env) {
      value = substitute_known_placeholders(value, row);
    }
  }

  /// `templ` (the template's `key`) with the row's columns filled in and an element that is
  /// exactly `{overrides}` replaced by the row's overrides, one element each.
  std::vector<std::string> row_argv(const std::vector<std::string>& templ, const char* key,
                                    const std::map<std::string, std::string>& row,
                                    const std::vector<std::string>& overrides) {
    std::vector<std::string> argv;
    for (const auto& arg : templ) {
      if (arg == "{overrides}") {
        for (const auto& item : overrides) argv.push_back(escape_braces(item));
        continue;
      }
      if (arg.find("{overrides}") != std::string::npos) {
        diagnostics_.error({program_template_path(file_).string(), 0, 0, key},
                           "'" + arg +
                               "': write {overrides} as an argv element of its own (it "
                               "becomes one element per override)");
      }
      argv.push_back(substitute_known_placeholders(arg, row));
    }
    return argv;
  }

  void error(const CsvField& field, const std::string& column, const std::string& message) {
    diagnostics_.error({file_, field.line, field.column, column}, message);
  }

  /// Writes setting `key` (one value) as if the row's `column` had said it.
  void put(ExperimentRequest& experiment, const std::string& key, SettingValue value,
           const CsvField& field, const std::string& column) {
    experiment.settings.values[key] = {std::vector<SettingValue>{std::move(value)},
                                       {file_, field.line, field.column, column}};
  }

  std::optional<int64_t> positive(const CsvField& field, const std::string& column) {
    const auto value = parse_decimal(trim(field.value));
    if (!value || *value < 1) {
      error(field, column, "expected a positive integer, got '" + field.value + "'");
      return std::nullopt;
    }
    return value;
  }

  void read_branch(const CsvField& field, ExperimentRequest& experiment) {
    const auto branch = trim(field.value);
    if (branch.empty() || branch[0] == '-' || branch.find_first_of(" \t") != std::string::npos) {
      error(field, "branch",
            "'" + field.value + "' is not a git ref; write a branch name (not starting with '-')");
    } else if (const auto problem = ref_syntax_problem(branch); !problem.empty()) {
      error(field, "branch",
            "'" + field.value + "' is not a git ref: it " + problem + "; write a branch name");
    }
    experiment.only_branch = branch;
  }

  void read_experiment(const CsvField& field, ExperimentRequest& experiment) {
    experiment.name = trim(field.value);
    experiment.model_where = {file_, field.line, field.column, "experiment"};
    std::string stem = experiment.name.substr(experiment.name.rfind('/') + 1);
    for (const std::string suffix : {".yaml", ".yml"}) {
      if (stem.size() > suffix.size() && stem.ends_with(suffix))
        stem.resize(stem.size() - suffix.size());
    }
    if (const auto found = kExperimentModels.find(experiment.name);
        found != kExperimentModels.end()) {
      experiment.model.zoo = found->second;
    } else {
      experiment.model.zoo = stem;  // checked against the zoo during expansion
    }
  }

  void read_data(const CsvField& field, ExperimentRequest& experiment) {
    const auto path = trim(field.value);
    if (path.empty()) return;
    if (path.ends_with(".h5") || path.ends_with(".hdf5")) {
      experiment.data = {"hdf5", path, "inputs", "targets"};
    } else if (!program_) {  // a program reads its own data: {data_path}
      diagnostics_.warning(
          {file_, field.line, field.column, "data_path"},
          "'" + path +
              "' is not an .h5/.hdf5 file, which is the only data file scalebench reads; "
              "this cell uses synthetic data");
    }
  }

  /// Applies the row's overrides; returns those a program row passes on to its program.
  std::vector<std::string> read_overrides(const CsvField& field, ExperimentRequest& experiment) {
    std::vector<std::string> passed;
    std::optional<int64_t> devices;
    std::optional<int64_t> nodes;
    const std::vector<std::string> supported = supported_overrides();
    std::set<std::string> seen;
    for (auto item : split_overrides(field.value)) {
      const std::string as_written = item;  // Hydra's `+` (add a key) matters to a program
      while (!item.empty() && item[0] == '+') item.erase(0, 1);
      const auto equals = item.find('=');
      const std::string key = item.substr(0, equals);
      const std::string value = equals == std::string::npos ? "" : item.substr(equals + 1);
      if (!seen.insert(key).second) {
        error(field, "overrides",
              "override '" + key + "' is given twice in this row; keep only one of the two");
        continue;
      }
      const bool known = equals != std::string::npos &&
                         std::find(supported.begin(), supported.end(), key) != supported.end();
      if (program_ && !consumed_only(key)) passed.push_back(as_written);
      if (program_ && ((!known && !key.starts_with("scalebench.")) || key.starts_with("data."))) {
        continue;  // the program's own
      }
      if (!known) {
        const auto suggestion = closest_match(key, supported);
        error(field, "overrides",
              "unsupported override '" + item + "'" +
                  (suggestion.empty() ? "" : " (did you mean '" + suggestion + "'?)") +
                  "; supported keys: " + join(supported));
        continue;
      }
      if (!apply_override(key, value, field, experiment, devices, nodes)) {
        error(field, "overrides",
              "bad value in override '" + item +
                  "'; see the CytoDL mapping in docs/matrix-reference.md");
      }
    }
    if (devices || nodes) {
      int64_t world_size = 0;  // an absurd product is refused by the range check
      if (__builtin_mul_overflow(devices.value_or(1), nodes.value_or(1), &world_size)) {
        world_size = std::numeric_limits<int64_t>::max();
      }
      put(experiment, "world_size", world_size, field, "overrides");
    }
    return passed;
  }

  bool apply_override(const std::string& key, const std::string& value, const CsvField& field,
                      ExperimentRequest& experiment, std::optional<int64_t>& devices,
                      std::optional<int64_t>& nodes) {
    const auto number = parse_decimal(value);
    if (key == "trainer.precision") {
      const auto precision = lightning_precision(value);
      if (precision) put(experiment, "precision", to_string(*precision), field, "overrides");
      return precision.has_value();
    }
    if (key == "trainer.accelerator") {
      const auto device = trainer_device(value);
      if (device) put(experiment, "device", to_string(*device), field, "overrides");
      return device.has_value();
    }
    if (key == "trainer.devices" || key == "trainer.num_nodes") {
      (key == "trainer.devices" ? devices : nodes) = number;
      return number && *number >= 1;
    }
    if (key == "seed" && number) put(experiment, "seed", *number, field, "overrides");
    if (key == "seed") return number && *number >= 0;
    if (const SettingDef* setting = find_setting(key.substr(key.find('.') + 1));
        setting && key.starts_with("scalebench.")) {
      // Parsed as the setting's type here; its range is checked with every other value's.
      const auto parsed = parse_setting_text(*setting, value);
      if (parsed) put(experiment, std::string(setting->key), *parsed, field, "overrides");
      return parsed.has_value();
    }
    if (key == "scalebench.baseline.branch" || key == "scalebench.baseline.metrics") {
      return read_baseline(key, value, field);
    }
    if (key == "scalebench.model") {
      experiment.model.zoo = value;
      experiment.model_where = {file_, field.line, field.column, "overrides"};
      return !value.empty();
    }
    if (key == "scalebench.torchscript") {  // the user's own model, a path in the branch tree
      experiment.model = ModelSpec{};
      experiment.model.torchscript = value;
      experiment.model_where = {file_, field.line, field.column, "overrides"};
      return !value.empty();
    }
    if (key == "scalebench.num_classes") {
      if (!number || *number < 1) return false;
      experiment.num_classes = {*number, {file_, field.line, field.column, "overrides"}};
      return true;
    }
    if (key == "scalebench.input_shape") {
      const auto shape = shape_list(value);
      if (!shape) return false;
      experiment.input_shape = {*shape, {file_, field.line, field.column, "overrides"}};
      return true;
    }
    if (experiment.data.kind != "hdf5" || value.empty()) return false;
    (key == "data.inputs" ? experiment.data.inputs : experiment.data.targets) = value;
    return true;
  }

  /// Note [Task file baseline]: `scalebench.baseline.branch=<ref>` and
  /// `scalebench.baseline.metrics=[<name>,<name>]` set the matrix's `baseline:` (the YAML
  /// key); every row that gives one must give the same.
  bool read_baseline(const std::string& key, const std::string& value, const CsvField& field) {
    const bool branch = key == "scalebench.baseline.branch";
    if (value.empty()) return false;
    BaselineSpec given = baseline_;
    if (branch) {
      given.branch = value;
    } else {
      given.metrics.clear();
      // Hydra's list syntax, `[a,b]` (a comma outside brackets separates overrides), or one.
      const bool listed = value.size() >= 2 && value.front() == '[' && value.back() == ']';
      if (value.front() == '[' && !listed) return false;
      std::stringstream names(listed ? value.substr(1, value.size() - 2) : value);
      for (std::string name; std::getline(names, name, ',');) {
        if (name.empty()) return false;
        given.metrics.push_back(name);
      }
    }
    const bool earlier = branch ? !baseline_.branch.empty() : !baseline_.metrics.empty();
    if (earlier && !(given == baseline_)) {
      error(field, "overrides",
            "override '" + key + "=" + value + "' differs from an earlier row's (line " +
                std::to_string(baseline_line_) +
                "); the baseline is the whole task file's: give every row the same, or one row");
      return true;  // reported here, not as a bad value
    }
    baseline_ = given;
    baseline_line_ = field.line;
    return true;
  }

 public:
  /// The baseline the rows asked for (Note [Task file baseline]) and the line that set it.
  const BaselineSpec& baseline() const { return baseline_; }
  int baseline_line() const { return baseline_line_; }

 private:
  std::string file_;
  bool inference_;
  Diagnostics& diagnostics_;
  const std::optional<ProgramSpec>& program_;
  BaselineSpec baseline_;
  int baseline_line_ = 0;
};

std::vector<std::string> trimmed(const CsvRecord& record) {
  std::vector<std::string> names;
  for (const auto& field : record.fields) names.push_back(trim(field.value));
  return names;
}

}  // namespace

MatrixRequest read_cytodl_csv(const std::string& text, const std::string& file, std::string& format,
                              Diagnostics& diagnostics) {
  MatrixRequest request;
  request.file = file;
  const auto records = parse_csv(text, file, diagnostics);
  if (diagnostics.has_errors()) return request;
  if (records.empty()) return request;
  const auto header = trimmed(records.front());
  const bool inference = header == kInferHeader;
  if (!inference && header != kTrainHeader) {
    diagnostics.error({file, records.front().line, 1, "header"},
                      "not a CytoDL task header; the first line must be '" +
                          join(kTrainHeader, ",") + "' (training) or '" + join(kInferHeader, ",") +
                          "' (inference)");
    return request;
  }
  format = inference ? "cytodl-infer-csv" : "cytodl-train-csv";
  const size_t columns = header.size();
  // Note [CytoDL program rows]: a template next to the file makes every row a program.
  std::optional<ProgramSpec> program;
  const auto template_path = program_template_path(file);
  if (std::error_code missing; std::filesystem::is_regular_file(template_path, missing)) {
    std::ifstream in(template_path);
    const std::string template_text((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
    program = read_program_template(template_text, template_path.string(), diagnostics);
    if (!program) return request;
  }
  RowReader reader(file, inference, diagnostics, program);
  std::set<std::string> seen_branches;
  for (size_t r = 1; r < records.size(); ++r) {
    const auto& record = records[r];
    if (record.fields.size() != columns) {
      diagnostics.error({file, record.line, 1, ""},
                        "row has " + std::to_string(record.fields.size()) +
                            " fields, the header has " + std::to_string(columns) +
                            "; quote fields that contain commas");
      continue;
    }
    auto experiment = reader.read(record);
    if (seen_branches.insert(*experiment.only_branch).second)
      request.branches.push_back(*experiment.only_branch);
    request.experiments.push_back(std::move(experiment));
  }
  if (request.experiments.empty() && !diagnostics.has_errors()) {
    diagnostics.error({file, records.front().line, 1, ""},
                      "the task file has a header but no rows; add at least one task");
  }
  request.baseline = reader.baseline();  // Note [Task file baseline]
  if (!request.baseline.branch.empty() && !seen_branches.count(request.baseline.branch)) {
    diagnostics.error({file, reader.baseline_line(), 1, "overrides"},
                      "scalebench.baseline.branch=" + request.baseline.branch +
                          " is no row's branch (" + join(request.branches) +
                          "); name the branch of the rows to compare with");
  }
  if (!request.experiments.empty() && !diagnostics.has_errors()) {
    // A row names the user's experiment, but what runs may be a stand-in: say so.
    // Built-in (zoo) models run scalebench's code, never the branch's; a TorchScript model
    // comes from the branch's tree and does differ.
    std::set<std::string> models;
    for (const auto& experiment : request.experiments) {
      if (experiment.model.torchscript.empty() && experiment.program.command.empty()) {
        models.insert(experiment.model.zoo);
      }
    }
    models.erase("");
    std::string names;
    for (const auto& model : models) names += (names.empty() ? "" : ", ") + model;
    if (!models.empty()) {
      diagnostics.warning(
          {file, records.front().line, 1, ""},
          "every row runs scalebench's built-in stand-in model (" + names +
              ") with the row's settings, the same code on every branch: differences between "
              "branches are noise, not your code. To measure each branch's own train.py, "
              "put a program template next to this file, " +
              program_template_path(file).filename().string() +
              ", e.g. command: [python, cyto_dl/train.py, \"experiment={experiment}\", "
              "\"trainer={trainer}\", \"data.batch_size={batch_size}\", \"{overrides}\"] "
              "(docs/programs.md#cytodl-task-files)");
    }
  }
  request.repo = ".";
  return request;
}

}  // namespace scalebench
