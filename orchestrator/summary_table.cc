#include "orchestrator/summary_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <sstream>
#include <tuple>

#include "common/base/diagnostics.h"
#include "common/cell/cell_spec.h"
#include "common/cell/repetition_stats.h"
#include "common/cell/stats.h"
#include "orchestrator/console_text.h"
#include "results/cells.h"
#include "results/model_flops.h"
#include "results/overview.h"

namespace scalebench {
namespace {

std::string fixed(double value, int decimals) {
  if (std::isnan(value)) return "-";
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

/// The CellSpec of a stored spec; nullopt where it cannot be read back (a damaged or older
/// file).
std::optional<CellSpec> stored_spec(const nlohmann::json& spec) {
  try {
    return cell_spec_from_json(spec);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

/// The label's part after "/w<world>/" without its "/rep<k>" ("bf16/channels_last=true"); the
/// stored precision where the spec cannot be read back.
std::string variant_of(const nlohmann::json& spec) {
  const auto cell = stored_spec(spec);
  if (!cell) return overview_text(spec, "precision");
  const std::string label = cell_label(*cell);
  const std::string world = "/w" + std::to_string(cell->world_size) + "/";
  const size_t at = label.find(world);
  std::string variant = at == std::string::npos ? "" : label.substr(at + world.size());
  if (const size_t rep = variant.rfind("/rep"); rep != std::string::npos) variant.resize(rep);
  return variant;
}

/// A stored flag of the summary (int8 or bool); true when absent.
bool flag_holds(const nlohmann::json& summary, const char* name) {
  if (!summary.contains(name)) return true;
  const auto& value = summary.at(name);
  return value.is_boolean() ? value.get<bool>() : (value.is_number() && value != 0);
}

/// Why a cell is not trusted, in the words of the analysis's trust table (tables/quality.py):
/// one notion of trust in every table (issue 54).
std::string untrusted_because(const nlohmann::json& summary, const nlohmann::json& cell) {
  std::vector<std::string> reasons;
  if (!flag_holds(summary, "valid_enough_iterations")) {
    reasons.push_back("only " + std::to_string(overview_integer(summary, "count")) +
                      " samples (< " +
                      std::to_string(overview_integer(summary, "min_valid_iterations")) + ")");
  }
  if (!flag_holds(summary, "valid_cv")) {
    const std::string stop = overview_text(summary, "stop_reason");
    if (stop == "budget" || stop == "cap") {
      reasons.push_back("interval short of ci_width (stopped on its " + stop +
                        "): raise max_seconds or max_iterations, or ci_width");
    } else {
      reasons.push_back("cv " + fixed(100 * overview_number(summary, "cv"), 1) + "% > " +
                        fixed(100 * overview_number(summary, "max_valid_cv"), 0) + "%");
    }
  }
  if (!flag_holds(summary, "valid_drift")) {
    const double drift = overview_number(summary, "drift");
    reasons.push_back(std::string("warm-up drift ") + (drift >= 0 ? "+" : "") +
                      fixed(100 * drift, 1) + "% (|drift| > " +
                      fixed(100 * overview_number(summary, "max_valid_drift"), 0) + "%)");
  }
  if (!flag_holds(summary, "valid_replicas_in_sync")) {
    reasons.push_back("replicas out of sync (param_checksum differs)");
  }
  const auto untrusted = cell.value("untrusted_reasons", nlohmann::json());
  if (untrusted.is_array()) {
    for (const auto& reason : untrusted) {
      if (reason.is_string()) reasons.push_back(reason.get<std::string>());
    }
  }
  return join(reasons, "; ");
}

SummaryRow row_of(const std::string& id, const nlohmann::json& cell) {
  SummaryRow row;
  const nlohmann::json spec = overview_json(cell.value("spec", nlohmann::json::object()));
  row.variant = variant_of(spec);
  row.cell_id = id.empty() ? overview_text(cell, "cell_id") : id;
  const auto stored = stored_spec(spec);
  row.label = stored ? cell_label(*stored) : row.cell_id;
  // No placeholder for a missing branch in what a user reads (issue 54: labels began "-/").
  if (row.label.rfind("-/", 0) == 0) row.label.erase(0, 2);
  row.cpu_threads = overview_integer(spec, "cpu_threads");
  row.branch = overview_text(spec, "branch");
  row.experiment = overview_text(spec, "experiment");
  row.mode = overview_text(spec, "mode");
  row.batch_size = overview_integer(spec, "batch_size");
  row.world_size = overview_integer(spec, "world_size");
  row.repetition = overview_integer(spec, "repetition");
  row.repetitions = std::max(1LL, overview_integer(spec, "repetitions"));
  row.status = overview_text(cell, "status");
  row.reason = overview_text(cell, "reason");
  row.median_s = kNaN;
  row.throughput_samples_per_s = kNaN;
  row.cpu_threads_per_core = kNaN;
  const auto summary = overview_json(cell.value("summary", nlohmann::json()));
  if (summary.is_object() && !summary.empty()) {
    row.metric = overview_text(summary, "metric");
    row.median_s = overview_number(summary, "median_s");
    row.throughput_samples_per_s = overview_number(summary, "throughput_samples_per_s");
    row.cpu_threads_per_core = overview_number(summary, "cpu_threads_per_core");
    if (row.batch_size == kBatchAuto) row.chosen_batch = overview_integer(summary, "batch_size");
    if (summary.contains("valid")) {
      const auto& valid = summary.at("valid");
      row.valid = valid.is_boolean() ? valid.get<bool>() : (valid.is_number() && valid != 0);
      if (!*row.valid) row.untrusted_because = untrusted_because(summary, cell);
    }
  }
  const auto accuracy = cell.value("accuracy", nlohmann::json());
  if (accuracy.is_object()) {
    const auto checks = overview_json(accuracy.value("failed_checks", nlohmann::json::array()));
    row.accuracy = overview_text(accuracy, "verdict") == "passed" ? "passed" : "FAIL";
    if (row.accuracy == "FAIL" && checks.is_array() && !checks.empty() &&
        checks.front().is_string()) {
      row.accuracy += " " + checks.front().get<std::string>();
    }
  }
  return row;
}

/// The '#' header and units lines and one line per row, every column right-aligned to its
/// widest entry, two spaces apart (nccl-tests' style).
std::string aligned_columns(const std::vector<std::string>& header,
                            const std::vector<std::string>& units,
                            const std::vector<std::vector<std::string>>& table) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = std::max(header[c].size(), units[c].size());
    for (const auto& line : table) width[c] = std::max(width[c], line[c].size());
  }
  std::ostringstream out;
  auto print = [&](const std::vector<std::string>& cells, const char* lead) {
    out << lead;
    for (size_t c = 0; c < cells.size(); ++c) {
      out << std::string(width[c] - cells[c].size() + 2, ' ') << cells[c];
    }
    out << "\n";
  };
  print(header, "#");
  print(units, "#");
  for (const auto& line : table) print(line, " ");
  return out.str();
}

}  // namespace

std::vector<SummaryRow> summary_rows(const nlohmann::json& overview) {
  std::vector<SummaryRow> rows;
  if (!overview.is_object()) return rows;
  const auto cells = overview.value("cells", nlohmann::json::object());
  if (cells.is_object()) {
    for (const auto& [id, cell] : cells.items()) rows.push_back(row_of(id, cell));
  } else if (cells.is_array()) {
    for (const auto& cell : cells) rows.push_back(row_of("", cell));
  }
  std::sort(rows.begin(), rows.end(), [](const SummaryRow& a, const SummaryRow& b) {
    return std::tie(a.branch, a.experiment, a.mode, a.world_size, a.batch_size, a.variant,
                    a.repetition, a.cell_id) < std::tie(b.branch, b.experiment, b.mode,
                                                        b.world_size, b.batch_size, b.variant,
                                                        b.repetition, b.cell_id);
  });
  return rows;
}

std::map<std::string, size_t> status_counts(const std::vector<SummaryRow>& rows) {
  std::map<std::string, size_t> counts;
  for (const auto& row : rows) ++counts[row.status];
  return counts;
}

std::string format_summary_table(const std::vector<SummaryRow>& rows) {
  std::vector<std::string> header{"branch", "experiment", "mode",    "batch",    "world", "metric",
                                  "median", "samples",    "trusted", "accuracy", "status"};
  std::vector<std::string> units{"", "", "", "", "", "", "(ms)", "(/s)", "", "", ""};
  std::vector<std::vector<std::string>> table;
  table.reserve(rows.size());
  for (const auto& row : rows) {
    table.push_back({row.branch.empty() ? "-" : row.branch, row.experiment, row.mode,
                     row.batch_size == kBatchAuto
                         ? "auto" + (row.chosen_batch > 0 ? ":" + std::to_string(row.chosen_batch)
                                                          : std::string())
                         : std::to_string(row.batch_size),
                     std::to_string(row.world_size), row.metric.empty() ? "-" : row.metric,
                     fixed(row.median_s * 1e3, 3), fixed(row.throughput_samples_per_s, 1),
                     row.valid ? (*row.valid ? "yes" : "no") : "-",
                     row.accuracy.empty() ? "-" : row.accuracy, row.status});
  }
  // A column "variant" (precision and settings) only where a cell is not plain fp32: tables
  // of one precision and no switches keep their shape.
  if (std::any_of(rows.begin(), rows.end(),
                  [](const auto& row) { return !row.variant.empty() && row.variant != "fp32"; })) {
    constexpr size_t kVariantColumn = 5;  // after "world"
    header.insert(header.begin() + kVariantColumn, "variant");
    units.insert(units.begin() + kVariantColumn, "");
    for (size_t i = 0; i < rows.size(); ++i) {
      table[i].insert(table[i].begin() + kVariantColumn,
                      rows[i].variant.empty() ? "-" : rows[i].variant);
    }
  }
  // Note [Repetitions]: a column "rep" (k/N) only when some cell is repeated.
  if (std::any_of(rows.begin(), rows.end(), [](const auto& row) { return row.repetitions > 1; })) {
    constexpr size_t kRepColumn = 5;  // after "world"
    header.insert(header.begin() + kRepColumn, "rep");
    units.insert(units.begin() + kRepColumn, "");
    for (size_t i = 0; i < rows.size(); ++i) {
      table[i].insert(table[i].begin() + kRepColumn,
                      rows[i].repetitions > 1 ? std::to_string(rows[i].repetition + 1) + "/" +
                                                    std::to_string(rows[i].repetitions)
                                              : "-");
    }
  }
  std::ostringstream out;
  out << aligned_columns(header, units, table);
  out << "# Cells: " << rows.size();
  for (const auto& [status, count] : status_counts(rows)) out << ", " << count << " " << status;
  out << "\n";
  for (const auto& row : rows) {
    if (row.status != "ok" && !row.reason.empty()) {
      out << "#  " << row.label << " " << row.status << ": " << row.reason << "\n";
    }
  }
  // One notion of trust (tables/quality.py): every untrusted cell with its reason.
  for (const auto& row : rows) {
    if (row.valid && !*row.valid) {
      out << wrap_words(row.label + " not trusted: " +
                            (row.untrusted_because.empty() ? std::string("see `scalebench analyze`")
                                                           : row.untrusted_because),
                        "#  ", "#    ");
    }
  }
  // Note [CPU oversubscription]: one line for every cell that ran more busy threads than
  // cores, naming the worst.
  const SummaryRow* worst = nullptr;
  size_t oversubscribed = 0;
  for (const auto& row : rows) {
    if (!(row.cpu_threads_per_core > 1.0)) continue;
    ++oversubscribed;
    if (worst == nullptr || row.cpu_threads_per_core > worst->cpu_threads_per_core) worst = &row;
  }
  if (worst != nullptr) {
    // With cpu_threads auto (cores / workers) the threads already fit the cores, and what
    // exceeds them is the training cells' MPI communication thread: the node has fewer than
    // two cores a worker, which no setting of the cell changes. A note, not a warning.
    const bool auto_threads = worst->cpu_threads == 0;
    const std::string what = std::to_string(oversubscribed) + " cell" +
                             (oversubscribed == 1 ? "" : "s") +
                             " ran more busy CPU threads than cores (worst " +
                             fixed(worst->cpu_threads_per_core, 2) + " per core: " + worst->label +
                             "): their backward / comm_wait split reflects core " + "contention; ";
    const std::string remedy =
        auto_threads
            ? "cpu_threads is already auto (cores / workers): each training worker's MPI "
              "communication thread needs a core of its own, so run fewer workers a node for a "
              "clean split "
            : "set cpu_threads so that workers x (cpu_threads + 1) <= cores, or leave it auto ";
    out << wrap_words(
        what + remedy + "(docs/metrics.md#cpu-threads-and-the-backward--comm_wait-split)",
        auto_threads ? "# note: " : "# warning: ", "#   ");
  }
  return out.str();
}

std::string format_program_times(const nlohmann::json& overview) {
  std::vector<SummaryRow> rows = summary_rows(overview);
  const auto stored = overview.value("cells", nlohmann::json::object());
  if (!stored.is_object()) return "";
  const auto seconds = [](const nlohmann::json& times, const char* key) {
    return fixed(overview_number(times, key), 2);  // "-" where the figure is missing (NaN)
  };
  std::vector<std::vector<std::string>> table;
  for (const auto& row : rows) {
    if (row.status != "ok" || !stored.contains(row.cell_id)) continue;
    const auto times = stored.at(row.cell_id).value("program_times", nlohmann::json());
    if (!times.is_object()) continue;
    std::vector<std::pair<double, std::string>> segments;
    const auto named = times.value("segments", nlohmann::json::object());  // outlives the loop
    for (const auto& [name, total] : named.items()) {
      if (total.is_number()) segments.emplace_back(total.get<double>(), name);
    }
    std::sort(segments.begin(), segments.end(), std::greater<>());
    std::string longest;
    for (size_t i = 0; i < std::min<size_t>(segments.size(), 3); ++i) {
      longest += (i ? ", " : "") + segments[i].second + " " + fixed(segments[i].first, 2);
    }
    table.push_back({row.branch.empty() ? "-" : row.branch, row.experiment, row.mode,
                     std::to_string(row.batch_size), std::to_string(row.world_size),
                     seconds(times, "wall_s"), seconds(times, "program_startup_s"),
                     seconds(times, "steps_s"), seconds(times, "program_after_steps_s"),
                     longest.empty() ? "-" : longest});
  }
  if (table.empty()) return "";
  std::ostringstream out;
  out << "# Program cells: where the wall time went (s, median over ranks; every segment: "
         "scalebench analyze --details)\n";
  out << aligned_columns({"branch", "experiment", "mode", "batch", "world", "wall", "to step 1",
                          "steps", "after", "longest segments"},
                         {"", "", "", "", "", "(s)", "(s)", "(s)", "(s)", "(s)"}, table);
  return out.str();
}

nlohmann::json info_json(const std::string& file, const nlohmann::json& overview) {
  auto rows = summary_rows(overview);
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.cell_id < b.cell_id; });
  nlohmann::json counts = nlohmann::json::object();
  for (const auto& [status, count] : status_counts(rows)) counts[status] = count;
  nlohmann::json cells = nlohmann::json::array();
  const auto stored = overview.value("cells", nlohmann::json::object());
  for (const auto& row : rows) {
    nlohmann::json source = nlohmann::json::object();
    if (stored.is_object() && stored.contains(row.cell_id)) {
      source = stored.at(row.cell_id);
    } else if (stored.is_array()) {
      for (const auto& cell : stored) {
        if (overview_text(cell, "cell_id") == row.cell_id) source = cell;
      }
    }
    nlohmann::json summary = overview_json(source.value("summary", nlohmann::json()));
    nlohmann::json cell{{"cell_id", row.cell_id},
                        {"status", row.status},
                        {"failed_phase", overview_text(source, "failed_phase")},
                        {"reason", row.reason},
                        {"spec", overview_json(source.value("spec", nlohmann::json::object()))},
                        {"summary", summary.is_object() ? summary : nlohmann::json(nullptr)}};
    // Note [Requested vs effective]: what took effect, where the cell recorded it.
    nlohmann::json effective = nlohmann::json::object();
    if (source.is_object()) {
      for (const auto& [key, value] : source.items()) {
        if (key.starts_with(results::kEffectivePrefix)) {
          effective[key.substr(std::string_view(results::kEffectivePrefix).size())] = value;
        }
      }
    }
    if (!effective.empty()) {
      cell["effective"] = effective;
      cell["ineffective_reasons"] = source.value("ineffective_reasons", nlohmann::json::array());
    }
    if (const auto accuracy = source.value("accuracy", nlohmann::json()); accuracy.is_object()) {
      cell["accuracy"] = accuracy;  // Note [Accuracy validation]
    }
    if (const auto times = source.value("program_times", nlohmann::json()); times.is_object()) {
      cell["program_times"] = times;  // Note [Run-level segments]
    }
    if (const auto flops = cell_flops(source)) {
      auto optional = [](const std::optional<double>& v, double scale) {
        return v ? nlohmann::json(*v / scale) : nlohmann::json(nullptr);
      };
      cell["mfu"] = {{"device", flops->device},
                     {"precision_used", flops->precision_used},
                     {"flops_per_sample", flops->flops_per_sample},
                     {"achieved_tflops", flops->achieved_flops / 1e12},
                     {"peak_tflops", optional(flops->peak_flops, 1e12)},
                     {"mfu", optional(flops->mfu, 1.0)}};
    }
    cells.push_back(std::move(cell));
  }
  nlohmann::json damaged = nlohmann::json::array();
  const nlohmann::json damaged_cells = overview.value("damaged_cells", nlohmann::json::object());
  for (const auto& [id, problem] : damaged_cells.items()) {
    damaged.push_back({{"cell_id", id}, {"problem", problem}});
  }
  nlohmann::json series = nlohmann::json::array();
  for (const auto& s : series_of_overview(overview)) {
    auto finite = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
    nlohmann::json medians = nlohmann::json::array();
    for (const double m : s.repetition_median_s) medians.push_back(finite(m));
    series.push_back(
        {{"series_id", s.series_id},
         {"metric", s.metric},
         {"repetitions", s.repetitions},
         {"completed", s.completed},
         {"cells", s.cells},
         {"repetition_median_s", medians},
         {"median_s", finite(s.median_s)},
         {"median_s_ci", {finite(s.median_interval.low), finite(s.median_interval.high)}},
         {"throughput_samples_per_s", finite(s.throughput)},
         {"throughput_ci", {finite(s.throughput_interval.low), finite(s.throughput_interval.high)}},
         {"spread_rel", finite(s.spread_rel)},
         {"disagree", s.disagree}});
  }
  return {{"file", file},
          {"provenance", overview.value("provenance", nlohmann::json::object())},
          {"counts", counts},
          {"cells", cells},
          {"series", series},
          {"damaged_cells", damaged},
          {"problems", overview.value("problems", nlohmann::json::array())}};
}

std::string format_series_table(const nlohmann::json& overview) {
  const auto all = series_of_overview(overview);
  if (all.empty()) return "";
  const auto cells = overview.value("cells", nlohmann::json::object());
  const std::vector<std::string> header{"branch",  "experiment", "mode",   "batch",
                                        "world",   "reps",       "median", "95% CI",
                                        "samples", "95% CI",     "spread", ""};
  const std::vector<std::string> units{"",     "",     "",     "",     "", "",
                                       "(ms)", "(ms)", "(/s)", "(/s)", "", ""};
  auto interval = [](const Interval& i, double scale, int decimals) {
    if (std::isnan(i.low)) return std::string("-");
    return "[" + fixed(i.low * scale, decimals) + ", " + fixed(i.high * scale, decimals) + "]";
  };
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> disagreeing;
  for (const auto& s : all) {
    const SummaryRow row = row_of(s.cells.front(), cells.value(s.cells.front(), nlohmann::json()));
    const std::string batch =
        row.batch_size == kBatchAuto ? "auto" : std::to_string(row.batch_size);
    table.push_back({row.branch.empty() ? "-" : row.branch, row.experiment, row.mode, batch,
                     std::to_string(row.world_size),
                     std::to_string(s.completed) + "/" + std::to_string(s.repetitions),
                     fixed(s.median_s * 1e3, 3), interval(s.median_interval, 1e3, 3),
                     fixed(s.throughput, 1), interval(s.throughput_interval, 1.0, 1),
                     std::isnan(s.spread_rel) ? "-" : fixed(s.spread_rel * 100.0, 1) + "%",
                     s.disagree ? "DISAGREE" : ""});
    if (s.disagree) {  // named by label without its "/rep<k>" (issue 54: no hex ids)
      std::string label = row.label;
      if (const size_t rep = label.rfind("/rep"); rep != std::string::npos) label.resize(rep);
      disagreeing.push_back(label);
    }
  }
  std::ostringstream out;
  out << "# Repetitions: median over the ok repetitions, 95% bootstrap interval "
         "(docs/repetitions.md)\n";
  out << aligned_columns(header, units, table);
  if (!disagreeing.empty()) {
    out << "# warning: " << disagreeing.size() << " series' repetitions span more than "
        << fixed(kMaxSpreadRel * 100.0, 0)
        << "% of their median (the machine changed during the run; the interval understates "
           "the uncertainty): ";
    for (size_t i = 0; i < disagreeing.size(); ++i) out << (i ? ", " : "") << disagreeing[i];
    out << "\n";
  }
  return out.str();
}

std::string format_damage(const nlohmann::json& overview) {
  std::string out;
  for (const auto& problem : overview.value("problems", nlohmann::json::array())) {
    out +=
        "# damaged: " + (problem.is_string() ? problem.get<std::string>() : problem.dump()) + "\n";
  }
  const nlohmann::json damaged_cells = overview.value("damaged_cells", nlohmann::json::object());
  for (const auto& [id, problem] : damaged_cells.items()) {
    out += "# damaged cell " + id + ": " +
           (problem.is_string() ? problem.get<std::string>() : problem.dump()) + "\n";
  }
  return out;
}

std::string format_mfu(const nlohmann::json& overview, bool achieved_only_rows) {
  const auto cells = overview.value("cells", nlohmann::json::object());
  if (!cells.is_object()) return "";
  std::vector<std::pair<std::string, CellFlops>> rows;
  for (const auto& [id, cell] : cells.items()) {
    const auto flops = cell_flops(cell);
    if (!flops || (!flops->mfu && !achieved_only_rows)) continue;
    // A spec that cannot be read back: the id names the cell.
    const auto spec = stored_spec(overview_json(cell.value("spec", nlohmann::json())));
    rows.emplace_back(spec ? cell_label(*spec) : id, *flops);
  }
  if (rows.empty()) return "";
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::ostringstream out;
  out << "# MFU: model FLOP/s over the dense peak of the GPU at the precision used "
         "(docs/metrics.md#mfu)\n";
  for (const auto& [label, f] : rows) {
    out << "#   " << label << "  " << (f.device.empty() ? "-" : f.device) << " " << f.precision_used
        << ": " << fixed(f.achieved_flops / 1e12, 2) << " TFLOP/s";
    if (f.mfu) {
      out << " of " << fixed(*f.peak_flops / 1e12, 1) << ", MFU " << fixed(*f.mfu, 3);
    } else {
      out << " (no peak for this device: achieved FLOP/s only)";
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace scalebench
