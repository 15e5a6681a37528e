// Reading the JSON of a results overview (read_results_overview, results/reader.h):
// the one set of accessors for rank 0's end-of-run table, `scalebench info` and the
// series between repetitions, so every reader treats a missing or mistyped field alike.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/cell/repetition_stats.h"

namespace scalebench {

/// `value`, or the JSON its text holds when it is a string of valid JSON (the reader keeps
/// specs, summaries and rank lists as JSON text); any other value unchanged.
nlohmann::json overview_json(const nlohmann::json& value);

/// `object[key]` as text: a string as is, another value as its JSON dump; "" when `object`
/// is not an object or the key is missing or null.
std::string overview_text(const nlohmann::json& object, const char* key);

/// `object[key]` when it is an integer; 0 otherwise.
long long overview_integer(const nlohmann::json& object, const char* key);

/// `object[key]` when it is a number; NaN otherwise.
double overview_number(const nlohmann::json& object, const char* key);

/// Every series of a results overview: cells whose spec has repetitions > 1, grouped by
/// series id (Note [Repetitions], common/cell/repetition_stats.h). Cells of one repetition
/// count only once.
std::vector<SeriesSummary> series_of_overview(const nlohmann::json& overview);

}  // namespace scalebench
