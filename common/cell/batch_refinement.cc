#include "common/cell/batch_refinement.h"

#include <algorithm>
#include <cmath>

namespace scalebench {

std::optional<MemoryLine> memory_line(const std::vector<BatchProbe>& probes) {
  double mean_x = 0;
  double mean_y = 0;
  double count = 0;
  for (const auto& p : probes) {
    if (p.status != ProbeStatus::kOk) continue;
    mean_x += static_cast<double>(p.batch);
    mean_y += p.peak_memory_bytes;
    count += 1;
  }
  if (count < 2) return std::nullopt;
  mean_x /= count;
  mean_y /= count;
  double sxy = 0;
  double sxx = 0;
  for (const auto& p : probes) {
    if (p.status != ProbeStatus::kOk) continue;
    const double dx = static_cast<double>(p.batch) - mean_x;
    sxy += dx * (p.peak_memory_bytes - mean_y);
    sxx += dx * dx;
  }
  if (!(sxx > 0)) return std::nullopt;
  const double slope = sxy / sxx;
  return MemoryLine{.intercept_bytes = mean_y - slope * mean_x, .bytes_per_sample = slope};
}

std::optional<MemoryLine> margin_line(const std::vector<BatchProbe>& probes, double cap_bytes) {
  const BatchProbe* below = nullptr;
  const BatchProbe* above = nullptr;
  for (const auto& p : probes) {
    if (p.status != ProbeStatus::kOk) continue;
    if (p.peak_memory_bytes <= cap_bytes) {
      if (below == nullptr || p.batch > below->batch) below = &p;
    } else if (above == nullptr || p.batch < above->batch) {
      above = &p;
    }
  }
  if (below == nullptr || above == nullptr || above->batch <= below->batch) {
    return memory_line(probes);
  }
  const double slope = (above->peak_memory_bytes - below->peak_memory_bytes) /
                       static_cast<double>(above->batch - below->batch);
  return MemoryLine{
      .intercept_bytes = below->peak_memory_bytes - slope * static_cast<double>(below->batch),
      .bytes_per_sample = slope};
}

std::optional<int64_t> refined_batch(const std::vector<BatchProbe>& probes,
                                     const BatchChoiceSettings& settings) {
  if (settings.memory_budget_bytes <= 0) return std::nullopt;
  const double cap = (1.0 - settings.safety_margin) * settings.memory_budget_bytes;
  const auto line = margin_line(probes, cap);
  if (!line || !(line->bytes_per_sample > 0)) return std::nullopt;
  const BatchFigures figures = batch_figures(probes, settings);
  const double predicted = std::floor((cap - line->intercept_bytes) / line->bytes_per_sample);
  if (!std::isfinite(predicted) || predicted <= static_cast<double>(figures.recommended_batch)) {
    return std::nullopt;
  }
  const int64_t batch = std::min(static_cast<int64_t>(predicted), figures.max_batch_ok);
  if (batch <= figures.recommended_batch) return std::nullopt;
  const bool probed = std::any_of(probes.begin(), probes.end(),
                                  [batch](const BatchProbe& p) { return p.batch == batch; });
  if (probed) return std::nullopt;
  return batch;
}

}  // namespace scalebench
