#include "results/overview.h"

#include <limits>
#include <map>

#include "common/cell/cell_spec.h"
#include "results/cells.h"

namespace scalebench {

nlohmann::json overview_json(const nlohmann::json& value) {
  if (!value.is_string()) return value;
  auto parsed = nlohmann::json::parse(value.get<std::string>(), nullptr, false);
  return parsed.is_discarded() ? value : parsed;
}

std::string overview_text(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || object.at(key).is_null()) return "";
  const auto& value = object.at(key);
  return value.is_string() ? value.get<std::string>() : value.dump();
}

long long overview_integer(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return 0;
  const auto& value = object.at(key);
  return value.is_number_integer() ? value.get<long long>() : 0;
}

double overview_number(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const auto& value = object.at(key);
  return value.is_number() ? value.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

std::vector<SeriesSummary> series_of_overview(const nlohmann::json& overview) {
  struct Collected {
    std::string metric;
    int64_t repetitions = 0;
    std::map<int64_t, RepetitionFigures> reps;
  };
  std::map<std::string, Collected> by_series;
  const auto cells = overview.find("cells");
  if (cells == overview.end() || !cells->is_object()) return {};
  for (const auto& [id, cell] : cells->items()) {
    if (!cell.is_object()) continue;
    const nlohmann::json spec_json = overview_json(cell.value("spec", nlohmann::json()));
    if (!spec_json.is_object()) continue;
    const auto repetitions = spec_json.value("repetitions", int64_t{1});
    if (repetitions <= 1) continue;
    const CellSpec spec = cell_spec_from_json(spec_json);
    // The stored series id (layout 1.9): one computed again from the stored spec differs
    // where that spec lacks an env value (Note [Stored program environment]).
    const auto stored = cell.find(results::kSeriesIdAttribute);
    const std::string id_of_series =
        stored != cell.end() && stored->is_string() ? stored->get<std::string>() : series_id(spec);
    Collected& series = by_series[id_of_series];
    series.repetitions = repetitions;
    RepetitionFigures figures;
    figures.cell_id = id;
    figures.repetition = spec.repetition;
    const nlohmann::json summary = overview_json(cell.value("summary", nlohmann::json()));
    figures.ok = cell.value("status", std::string()) == "ok" && summary.is_object();
    figures.median_s = overview_number(summary, "median_s");
    figures.throughput = overview_number(summary, "throughput_samples_per_s");
    if (summary.is_object() && series.metric.empty()) {
      series.metric = summary.value("metric", std::string());
    }
    series.reps[spec.repetition] = std::move(figures);
  }
  std::vector<SeriesSummary> out;
  for (auto& [id, series] : by_series) {
    std::vector<RepetitionFigures> reps;
    for (auto& [k, figures] : series.reps) reps.push_back(std::move(figures));
    out.push_back(summarize_series(id, series.metric, series.repetitions, std::move(reps)));
  }
  return out;
}

}  // namespace scalebench
