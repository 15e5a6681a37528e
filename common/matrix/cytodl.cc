// CytoDL task CSV reader: maps each row of a training or inference task file to one
// experiment entry of a MatrixRequest. The mapping table is in docs/matrix-reference.md.
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "common/base/decimal.h"
#include "common/cell/settings.h"
#include "common/cell/zoo_names.h"
#include "common/matrix/csv.h"
#include "common/matrix/git_repo.h"
#include "common/matrix/request.h"
#include "common/matrix/text.h"

namespace scalebench {
namespace {

const std::vector<std::string> kTrainHeader{"branch",     "experiment", "trainer",
                                            "max_epochs", "batch_size", "overrides"};
const std::vector<std::string> kInferHeader{"branch",  "experiment", "checkpoint_path", "data_path",
                                            "trainer", "batch_size", "overrides"};

/// CytoDL experiment configs with a zoo stand-in (3D image-to-image networks -> unet3d).
const std::map<std::string, std::string> kExperimentModels{
    {"im2im/segmentation", "unet3d"},
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
                                "scalebench.num_classes"};
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
  RowReader(const std::string& file, bool inference, Diagnostics& diagnostics)
      : file_(file), inference_(inference), diagnostics_(diagnostics) {}

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
    } else if (const auto epochs = positive(*fields["max_epochs"], "max_epochs")) {
      put(experiment, "iterations", *epochs, *fields["max_epochs"], "max_epochs");
    }
    read_overrides(*fields["overrides"], experiment);
    return experiment;
  }

 private:
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
    } else {
      diagnostics_.warning(
          {file_, field.line, field.column, "data_path"},
          "'" + path +
              "' is not an .h5/.hdf5 file, which is the only data file scalebench reads; "
              "this cell uses synthetic data");
    }
  }

  void read_overrides(const CsvField& field, ExperimentRequest& experiment) {
    std::optional<int64_t> devices;
    std::optional<int64_t> nodes;
    const std::vector<std::string> supported = supported_overrides();
    std::set<std::string> seen;
    for (auto item : split_overrides(field.value)) {
      while (!item.empty() && item[0] == '+') item.erase(0, 1);
      const auto equals = item.find('=');
      const std::string key = item.substr(0, equals);
      const std::string value = equals == std::string::npos ? "" : item.substr(equals + 1);
      if (!seen.insert(key).second) {
        error(field, "overrides",
              "override '" + key + "' is given twice in this row; keep only one of the two");
        continue;
      }
      if (equals == std::string::npos ||
          std::find(supported.begin(), supported.end(), key) == supported.end()) {
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

  std::string file_;
  bool inference_;
  Diagnostics& diagnostics_;
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
  RowReader reader(file, inference, diagnostics);
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
  request.repo = ".";
  return request;
}

}  // namespace scalebench
