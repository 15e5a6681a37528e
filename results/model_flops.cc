#include "results/model_flops.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "results/overview.h"

namespace scalebench {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

const nlohmann::json& shipped_devices() {
  static const nlohmann::json devices =
      nlohmann::json::parse(shipped_peak_flops_json()).at("devices");
  return devices;
}

}  // namespace

std::optional<double> peak_flops(const std::string& device, const std::string& precision) {
  const std::string name = lower(device);
  const nlohmann::json* best = nullptr;
  size_t best_length = 0;
  for (const auto& [key, entry] : shipped_devices().items()) {
    if (key.size() > best_length && name.find(lower(key)) != std::string::npos) {
      best = &entry;
      best_length = key.size();
    }
  }
  if (best == nullptr || !best->contains(precision) || !best->at(precision).is_number()) {
    return std::nullopt;
  }
  return best->at(precision).get<double>();
}

std::string precision_used(const nlohmann::json& spec, const nlohmann::json& effective) {
  std::string precision = overview_text(effective, "precision");
  if (precision.empty()) precision = overview_text(spec, "precision");
  if (precision == "bf16" || precision == "fp16") return precision;
  const std::string tf32 = overview_text(effective, "tf32");
  return tf32 == "true" || tf32 == "1" ? "tf32" : "fp32";
}

std::optional<CellFlops> cell_flops(const nlohmann::json& cell) {
  const nlohmann::json spec = overview_json(cell.value("spec", nlohmann::json::object()));
  const nlohmann::json flops = cell.value("model_flops", nlohmann::json::object());
  const nlohmann::json summary = overview_json(cell.value("summary", nlohmann::json()));
  const char* metric =
      overview_text(spec, "mode") == "train" ? "train_flops_per_sample" : "flops_per_sample";
  CellFlops out;
  out.flops_per_sample = overview_number(flops, metric);
  const double throughput = overview_number(summary, "throughput_samples_per_s");
  if (!(out.flops_per_sample > 0.0) || !(throughput > 0.0)) return std::nullopt;
  out.device = overview_text(cell, "device_name");
  // The overview keeps what took effect as the cell's attributes effective_<setting>.
  const nlohmann::json effective = {{"precision", overview_text(cell, "effective_precision")},
                                    {"tf32", overview_text(cell, "effective_tf32")}};
  out.precision_used = precision_used(spec, effective);
  out.achieved_flops = out.flops_per_sample * throughput;
  const auto peak = peak_flops(out.device, out.precision_used);
  const long long world = std::max(1LL, overview_integer(spec, "world_size"));
  if (peak && !out.device.empty()) {
    out.peak_flops = *peak * static_cast<double>(world);
    out.mfu = out.achieved_flops / *out.peak_flops;
  }
  return out;
}

}  // namespace scalebench
