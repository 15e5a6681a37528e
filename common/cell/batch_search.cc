#include "common/cell/batch_search.h"

#include <algorithm>
#include <cmath>

#include "common/base/error.h"
#include "common/cell/batch_refinement.h"
#include "common/cell/stats.h"

namespace scalebench {

std::string to_string(ProbeStatus status) {
  switch (status) {
    case ProbeStatus::kOk:
      return "ok";
    case ProbeStatus::kOom:
      return "oom";
    case ProbeStatus::kOverBudget:
      return "over_budget";
  }
  return "unknown";
}

BatchSearch::BatchSearch(int64_t min_batch, int64_t max_batch, double precision)
    : max_batch_(max_batch), precision_(precision) {
  if (min_batch < 1 || max_batch < min_batch) {
    throw Error("batch search: need 1 <= min_batch <= max_batch, got " + std::to_string(min_batch) +
                " and " + std::to_string(max_batch));
  }
  if (!(precision >= 0 && precision < 1)) {
    throw Error("batch search: need 0 <= batch_precision < 1, got " + std::to_string(precision));
  }
  next_ = min_batch;
}

void BatchSearch::record(bool fits) {
  if (!next_) throw Error("batch search: record() after the search ended");
  const int64_t probed = *next_;
  next_.reset();
  if (fits) {
    max_ok_ = probed;
  } else {
    first_failed_ = probed;
  }
  if (first_failed_ == 0) {  // still doubling
    if (probed < max_batch_) next_ = probed > max_batch_ / 2 ? max_batch_ : 2 * probed;
    return;
  }
  if (max_ok_ == 0) return;  // not even the smallest batch fits
  const auto gap = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(precision_ * static_cast<double>(max_ok_))));
  if (first_failed_ - max_ok_ > gap) next_ = max_ok_ + (first_failed_ - max_ok_) / 2;
}

namespace {}  // namespace

BatchFigures batch_figures(const std::vector<BatchProbe>& probes,
                           const BatchChoiceSettings& settings) {
  BatchFigures figures;
  figures.memory_per_sample_bytes = kNaN;
  std::vector<const BatchProbe*> fit;
  for (const auto& p : probes) {
    if (p.status == ProbeStatus::kOk) {
      fit.push_back(&p);
      figures.max_batch_ok = std::max(figures.max_batch_ok, p.batch);
    } else if (figures.oom_batch == 0 || p.batch < figures.oom_batch) {
      figures.oom_batch = p.batch;
    }
  }
  if (fit.empty()) return figures;
  std::sort(fit.begin(), fit.end(),
            [](const BatchProbe* a, const BatchProbe* b) { return a->batch < b->batch; });
  const BatchProbe* best = fit.front();
  for (const auto* p : fit) {
    if (p->throughput > best->throughput) best = p;
  }
  figures.best_batch = best->batch;
  for (const auto* p : fit) {
    if (p->throughput >= kKneeFraction * best->throughput) {
      figures.knee_batch = p->batch;
      break;
    }
  }
  const bool slo = settings.latency_slo_s > 0;
  for (const auto* p : fit) {
    if (slo && p->p99_s <= settings.latency_slo_s) figures.slo_batch = p->batch;
  }
  const double memory_cap = (1.0 - settings.safety_margin) * settings.memory_budget_bytes;
  const BatchProbe* recommended = nullptr;
  for (const auto* p : fit) {
    const bool within_margin =
        settings.memory_budget_bytes <= 0 || p->peak_memory_bytes <= memory_cap;
    const bool meets_slo = !slo || p->p99_s <= settings.latency_slo_s;
    if (within_margin && meets_slo && (!recommended || p->throughput > recommended->throughput)) {
      recommended = p;
    }
  }
  figures.recommended_batch = recommended ? recommended->batch : fit.front()->batch;
  const auto line = memory_line(probes);
  figures.memory_per_sample_bytes = line ? line->bytes_per_sample : kNaN;
  return figures;
}

}  // namespace scalebench
