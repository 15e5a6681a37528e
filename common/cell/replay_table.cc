#include "common/cell/replay_table.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "common/base/error.h"

namespace scalebench {
namespace {

/// The largest `jitter`: beyond it the iteration factor's floor of 0.5 would bite often.
constexpr double kMaxJitter = 0.5;

[[noreturn]] void refuse(const std::string& where, const std::string& what) {
  throw InputError(where + ": replay table: " + what + " (docs/replay.md#the-layer-table)");
}

double seconds(const nlohmann::json& object, const char* key, const std::string& where,
               const std::string& at, bool required) {
  const auto found = object.find(key);
  if (found == object.end()) {
    if (required) refuse(where, at + std::string(key) + " is missing: seconds >= 0");
    return 0.0;
  }
  if (!found->is_number() || !std::isfinite(found->get<double>()) || found->get<double>() < 0) {
    refuse(where, at + std::string(key) + " must be seconds >= 0, got " + found->dump());
  }
  return found->get<double>();
}

ReplayLayer parse_layer(const nlohmann::json& node, size_t index, const std::string& where) {
  const std::string at = "layers[" + std::to_string(index) + "].";
  if (!node.is_object()) refuse(where, at.substr(0, at.size() - 1) + " must be an object");
  ReplayLayer layer;
  layer.name = node.value("name", "layer" + std::to_string(index));
  layer.forward_s = seconds(node, "forward_s", where, at, true);
  layer.backward_s = seconds(node, "backward_s", where, at, true);
  if (const auto params = node.find("parameters"); params != node.end()) {
    if (!params->is_array()) refuse(where, at + "parameters must be a list of element counts");
    for (const auto& count : *params) {
      if (!count.is_number_integer() || count.get<int64_t>() < 1) {
        refuse(where, at + "parameters must hold element counts >= 1, got " + count.dump());
      }
      layer.parameter_elements.push_back(count.get<int64_t>());
    }
  }
  return layer;
}

}  // namespace

std::vector<int64_t> ReplayTable::parameter_bytes() const {
  std::vector<int64_t> bytes;
  for (const auto& layer : layers) {
    for (const int64_t count : layer.parameter_elements) bytes.push_back(count * element_bytes);
  }
  return bytes;
}

double ReplayTable::forward_s() const {
  return std::accumulate(
      layers.begin(), layers.end(), 0.0,
      [](double sum, const ReplayLayer& layer) { return sum + layer.forward_s; });
}

double ReplayTable::backward_s() const {
  return std::accumulate(layers.begin(), layers.end(), 0.0,
                         [](double sum, const ReplayLayer& l) { return sum + l.backward_s; });
}

ReplayTable parse_replay_table(const std::string& json_text, const std::string& where) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& error) {
    refuse(where, std::string("not JSON: ") + error.what());
  }
  if (!json.is_object()) refuse(where, "the file must hold one JSON object");
  ReplayTable table;
  table.model = json.value("model", std::string());
  table.source = json.value("source", std::string());
  if (const auto bytes = json.find("element_bytes"); bytes != json.end()) {
    if (!bytes->is_number_integer() || (bytes->get<int64_t>() != 4 && bytes->get<int64_t>() != 2)) {
      refuse(where, "element_bytes must be 4 (fp32 gradients) or 2 (16-bit), got " + bytes->dump());
    }
    table.element_bytes = bytes->get<int64_t>();
  }
  table.data_s = seconds(json, "data_s", where, "", false);
  table.optimizer_s = seconds(json, "optimizer_s", where, "", false);
  table.jitter = seconds(json, "jitter", where, "", false);
  if (table.jitter > kMaxJitter) {
    refuse(where, "jitter must be within [0, 0.5], got " + std::to_string(table.jitter));
  }
  const auto layers = json.find("layers");
  if (layers == json.end() || !layers->is_array() || layers->empty()) {
    refuse(where, "layers must be a non-empty list of {name, forward_s, backward_s, parameters}");
  }
  for (size_t i = 0; i < layers->size(); ++i)
    table.layers.push_back(parse_layer((*layers)[i], i, where));
  if (table.parameter_bytes().empty()) {
    refuse(where, "no layer has parameters: a replay without gradients reduces nothing");
  }
  return table;
}

std::vector<std::vector<size_t>> backward_ready_parameters(const ReplayTable& table) {
  std::vector<size_t> first(table.layers.size(), 0);
  size_t next = 0;
  for (size_t i = 0; i < table.layers.size(); ++i) {
    first[i] = next;
    next += table.layers[i].parameter_elements.size();
  }
  std::vector<std::vector<size_t>> ready;
  for (size_t i = table.layers.size(); i-- > 0;) {
    std::vector<size_t> indices(table.layers[i].parameter_elements.size());
    std::iota(indices.begin(), indices.end(), first[i]);
    ready.push_back(std::move(indices));
  }
  return ready;
}

}  // namespace scalebench
