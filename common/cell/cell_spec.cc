#include "common/cell/cell_spec.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <utility>

#include "common/base/error.h"
#include "common/cell/adaptive_stop.h"
#include "common/cell/settings.h"

namespace scalebench {
namespace {

template <typename Enum, size_t N>
std::optional<Enum> lookup(const std::array<std::pair<const char*, Enum>, N>& table,
                           const std::string& text) {
  for (const auto& [name, value] : table) {
    if (text == name) return value;
  }
  return std::nullopt;
}

template <typename Enum, size_t N>
std::string name_of(const std::array<std::pair<const char*, Enum>, N>& table, Enum value) {
  for (const auto& [name, candidate] : table) {
    if (candidate == value) return name;
  }
  return "?";
}

constexpr std::array<std::pair<const char*, Mode>, 2> kModes{
    {{"train", Mode::kTrain}, {"infer", Mode::kInfer}}};
constexpr std::array<std::pair<const char*, Precision>, 3> kPrecisions{
    {{"fp32", Precision::kFp32}, {"fp16", Precision::kFp16}, {"bf16", Precision::kBf16}}};
constexpr std::array<std::pair<const char*, Device>, 3> kDevices{
    {{"auto", Device::kAuto}, {"cpu", Device::kCpu}, {"cuda", Device::kCuda}}};
constexpr std::array<std::pair<const char*, Backend>, 3> kBackends{
    {{"auto", Backend::kAuto}, {"mpi", Backend::kMpi}, {"nccl", Backend::kNccl}}};

template <typename T>
T field(const nlohmann::json& json, const char* key) {
  if (!json.contains(key)) {
    throw InputError(std::string("cell spec JSON: missing field '") + key + "'");
  }
  try {
    return json.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("cell spec JSON: field '") + key + "': " + e.what());
  }
}

/// "/optimizer/lr" for json_key "optimizer.lr".
nlohmann::json::json_pointer json_pointer_of(const SettingDef& setting) {
  std::string path = "/" + std::string(setting.json_key);
  std::replace(path.begin(), path.end(), '.', '/');
  return nlohmann::json::json_pointer(path);
}

}  // namespace

std::string to_string(Mode mode) { return name_of(kModes, mode); }
std::string to_string(Precision precision) { return name_of(kPrecisions, precision); }
std::string to_string(Device device) { return name_of(kDevices, device); }
std::string to_string(Backend backend) { return name_of(kBackends, backend); }
std::optional<Mode> parse_mode(const std::string& text) { return lookup(kModes, text); }
std::optional<Precision> parse_precision(const std::string& text) {
  return lookup(kPrecisions, text);
}
std::optional<Device> parse_device(const std::string& text) { return lookup(kDevices, text); }
std::optional<Backend> parse_backend(const std::string& text) { return lookup(kBackends, text); }

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t hash = 14695981039346656037ULL;
  for (const unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 1099511628211ULL;
  }
  return hash;
}

nlohmann::json canonical_json(const CellSpec& spec) {
  nlohmann::json json;
  json["branch"] = spec.branch;
  json["commit"] = spec.commit;
  json["experiment"] = spec.experiment;
  json["model"] = {{"zoo", spec.model.zoo}, {"torchscript", spec.model.torchscript}};
  // Only when set: cells of zoo and TorchScript models keep the ids they had before.
  if (!spec.model.aoti.empty()) json["model"]["aoti"] = spec.model.aoti;
  if (!spec.model.replay.empty()) json["model"]["replay"] = spec.model.replay;
  // Note [Program placeholders]: a program cell's identity holds its command and env
  // templates; cells of built-in models keep the ids they had before programs existed.
  if (!spec.program.command.empty()) {
    json["program"] = {{"command", spec.program.command}, {"env", spec.program.env}};
    if (!spec.program.python.empty()) json["program"]["python"] = spec.program.python;
  }
  json["input_shape"] = spec.input_shape;
  json["num_classes"] = spec.num_classes;
  json["data"] = {{"kind", spec.data.kind},
                  {"path", spec.data.path},
                  {"inputs", spec.data.inputs},
                  {"targets", spec.data.targets}};
  json["checkpoint"] = spec.checkpoint;
  for (const auto& setting : settings_table()) {
    if (setting.id == IdRule::kNever) continue;
    const SettingValue value = setting.get(spec);
    if (setting.id == IdRule::kUnlessDefault && value == default_value(setting)) continue;
    json[json_pointer_of(setting)] = setting_json(value);
  }
  // Note [Repetitions]: repetition 0 keeps the id the cell has without the field.
  if (spec.repetition > 0) json["repetition"] = spec.repetition;
  if (spec.adaptive_repetitions) json["repetitions_auto"] = true;
  return json;
}

std::string compute_cell_id(const CellSpec& spec) {
  std::array<char, 17> hex{};
  std::snprintf(hex.data(), hex.size(), "%016llx",
                static_cast<unsigned long long>(fnv1a64(canonical_json(spec).dump())));
  return std::string(hex.data(), 16);
}

CellSpec finalize_cell_id(CellSpec spec) {
  spec.cell_id = compute_cell_id(spec);
  return spec;
}

nlohmann::json to_json(const CellSpec& spec) {
  nlohmann::json json = canonical_json(spec);
  // Settings outside the identity are still part of the spec (`interleave`).
  for (const auto& setting : settings_table()) {
    if (setting.id == IdRule::kNever)
      json[json_pointer_of(setting)] = setting_json(setting.get(spec));
  }
  json["source"] = spec.source;
  if (!spec.label_settings.empty()) json["label_settings"] = spec.label_settings;
  json["cell_id"] = spec.cell_id;
  return json;
}

CellSpec cell_spec_from_json(const nlohmann::json& json) {
  if (!json.is_object()) throw InputError("cell spec JSON: expected an object");
  CellSpec spec;
  spec.branch = field<std::string>(json, "branch");
  spec.commit = field<std::string>(json, "commit");
  spec.experiment = field<std::string>(json, "experiment");
  const auto model = field<nlohmann::json>(json, "model");
  spec.model.zoo = field<std::string>(model, "zoo");
  spec.model.torchscript = field<std::string>(model, "torchscript");
  spec.model.aoti = model.value("aoti", std::string());
  spec.model.replay = model.value("replay", std::string());
  if (const auto program = json.find("program"); program != json.end() && program->is_object()) {
    spec.program.command = field<std::vector<std::string>>(*program, "command");
    spec.program.env = field<std::map<std::string, std::string>>(*program, "env");
    spec.program.python = program->value("python", std::string());
  }
  spec.input_shape = field<std::vector<int64_t>>(json, "input_shape");
  spec.num_classes = field<int64_t>(json, "num_classes");
  const auto data = field<nlohmann::json>(json, "data");
  spec.data.kind = field<std::string>(data, "kind");
  spec.data.path = field<std::string>(data, "path");
  spec.data.inputs = field<std::string>(data, "inputs");
  spec.data.targets = field<std::string>(data, "targets");
  spec.checkpoint = field<std::string>(json, "checkpoint");
  for (const auto& setting : settings_table()) {
    const auto pointer = json_pointer_of(setting);
    if (!json.contains(pointer)) {
      // A setting added after the file was written: the file's cell had the default.
      if (setting.id == IdRule::kAlways) {
        throw InputError("cell spec JSON: missing field '" + std::string(setting.json_key) + "'");
      }
      continue;
    }
    const auto value = setting_from_json(setting, json.at(pointer));
    if (!value) {
      throw InputError("cell spec JSON: field '" + std::string(setting.json_key) +
                       "' has a value that is not a valid " + std::string(setting.key) + ": " +
                       json.at(pointer).dump());
    }
    setting.set(spec, *value);
  }
  if (const auto it = json.find("repetition"); it != json.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      throw InputError("cell spec JSON: field 'repetition' must be an integer >= 0, not " +
                       it->dump());
    }
    spec.repetition = it->get<int64_t>();
  }
  if (const auto it = json.find("repetitions_auto"); it != json.end()) {
    if (!it->is_boolean()) {
      throw InputError("cell spec JSON: field 'repetitions_auto' must be true or false, not " +
                       it->dump());
    }
    spec.adaptive_repetitions = it->get<bool>();
  }
  spec.source = json.value("source", std::string());
  if (const auto it = json.find("label_settings"); it != json.end() && it->is_array()) {
    for (const auto& key : *it) {
      if (key.is_string() && find_setting(key.get<std::string>()) != nullptr) {
        spec.label_settings.push_back(key.get<std::string>());
      }
    }
  }
  spec.cell_id = json.value("cell_id", std::string());
  return spec;
}

int64_t planned_warmup_iterations(const CellSpec& cell) {
  return warmup_auto(cell) ? WarmupAuto::kWarmupCap : cell.warmup_iterations;
}

int64_t planned_measured_iterations(const CellSpec& cell) {
  return iterations_auto(cell) ? cell.max_iterations : cell.measured_iterations;
}

std::string batch_text(int64_t batch_size) {
  return batch_size == kBatchAuto ? "auto" : std::to_string(batch_size);
}

std::string cell_label(const CellSpec& spec) {
  const std::string branch = spec.branch.empty() ? "-" : spec.branch;
  std::string label = branch + "/" + spec.experiment + "/" + to_string(spec.mode) + "/b" +
                      batch_text(spec.batch_size) + "/w" + std::to_string(spec.world_size) + "/" +
                      to_string(spec.precision);
  for (const auto& key : spec.label_settings) {
    if (const SettingDef* setting = find_setting(key)) {
      label += "/" + key + "=" + setting_text(*setting, setting->get(spec));
    }
  }
  if (spec.repetitions > 1) label += "/rep" + std::to_string(spec.repetition);
  return label;
}

std::string series_id(const CellSpec& spec) {
  if (spec.repetition == 0 && !spec.cell_id.empty()) return spec.cell_id;
  CellSpec first = spec;
  first.repetition = 0;
  return compute_cell_id(first);
}

}  // namespace scalebench
