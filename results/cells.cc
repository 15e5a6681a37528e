#include "results/cells.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/base/error.h"
#include "common/cell/stats.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "results/provenance.h"

namespace scalebench::results {
namespace {

/// Upper bound of one `timings` chunk; one chunk holds rows of one rank.
constexpr hsize_t kTimingChunkBytes = 1 << 20;
constexpr int kTimingGzipLevel = 4;

/// The `model` attribute: the zoo name, "torchscript:<path>", "aoti:<path>",
/// "replay:<path>" or "program:<command[0]>".
std::string model_name(const CellSpec& cell) {
  if (!cell.program.command.empty()) return "program:" + cell.program.command.front();
  if (!cell.model.aoti.empty()) return "aoti:" + cell.model.aoti;
  if (!cell.model.replay.empty()) return "replay:" + cell.model.replay;
  return cell.model.torchscript.empty() ? cell.model.zoo : "torchscript:" + cell.model.torchscript;
}

/// The spec as stored: a program's `env` values only where program_env_value_stored admits
/// them (Note [Environment allowlist]); the others keep their name, not their value. The
/// cell id was computed from the whole spec, so cells still differ by every value.
nlohmann::json stored_spec(const CellSpec& cell) {
  nlohmann::json spec = to_json(cell);
  if (const auto program = spec.find("program"); program != spec.end()) {
    for (auto& [name, value] : (*program)["env"].items()) {
      if (!program_env_value_stored(name, value.get<std::string>())) value = kNotStoredValue;
    }
  }
  return spec;
}

void write_spec_attributes(hid_t group, const CellSpec& cell) {
  using h5::write_int64_attribute;
  using h5::write_string_attribute;
  write_string_attribute(group, "spec", stored_spec(cell).dump());
  // Note [Repetitions]: a repetition's series id, computed from the spec as run: the stored
  // spec may lack env values (Note [Stored program environment]), and an id computed again
  // from it would split the series.
  if (cell.repetitions > 1) write_string_attribute(group, kSeriesIdAttribute, series_id(cell));
  write_string_attribute(group, "branch", cell.branch);
  write_string_attribute(group, "commit", cell.commit);
  write_string_attribute(group, "experiment", cell.experiment);
  write_string_attribute(group, "model", model_name(cell));
  write_string_attribute(group, "mode", to_string(cell.mode));
  write_string_attribute(group, "precision", to_string(cell.precision));
  write_string_attribute(group, "device", to_string(cell.device));
  write_string_attribute(group, "backend", to_string(cell.backend));
  write_int64_attribute(group, "batch_size", cell.batch_size);
  write_int64_attribute(group, "world_size", cell.world_size);
  write_int64_attribute(group, "warmup_iterations", cell.warmup_iterations);
  write_int64_attribute(group, "measured_iterations", cell.measured_iterations);
  write_int64_attribute(group, "samples", cell.samples);
  write_int64_attribute(group, "seed", static_cast<int64_t>(cell.seed));
}

/// `ranks`' per-row, per-phase values of `member` (timings_s or phase_starts_s) as one
/// (world, rows, phases) dataset `name` in the union of the phase names; NaN where a rank
/// has no row or phase (or no values at all). One chunk = rows of one rank, <= 1 MiB, gzip.
Hdf5Handle write_per_phase(hid_t group, const char* name, const std::vector<RankResult>& ranks,
                           const std::vector<std::string>& phases, size_t rows,
                           std::vector<double> RankResult::*member) {
  const hsize_t world = ranks.size();
  const hsize_t columns = phases.size();
  std::vector<double> values(world * rows * columns, kNaN);
  for (size_t g = 0; g < ranks.size(); ++g) {
    const RankResult& r = ranks[g];
    const std::vector<double>& source = r.*member;
    if (source.size() != r.timings_s.size()) continue;  // not recorded by this rank
    for (size_t c = 0; c < r.phases.size(); ++c) {
      const auto column = static_cast<size_t>(std::find(phases.begin(), phases.end(), r.phases[c]) -
                                              phases.begin());
      for (size_t i = 0; i < r.iterations(); ++i) {
        values[(g * rows + i) * columns + column] = source[i * r.phases.size() + c];
      }
    }
  }
  std::vector<hsize_t> chunk;
  if (world * rows * columns > 0) {
    const hsize_t chunk_rows =
        std::clamp<hsize_t>(kTimingChunkBytes / (sizeof(double) * columns), 1, rows);
    chunk = {1, chunk_rows, columns};
  }
  Hdf5Handle dataset = h5::write_double_dataset(group, name, {world, rows, columns}, values, chunk,
                                                kTimingGzipLevel);
  h5::write_string_attribute(dataset, "phases", nlohmann::json(phases).dump());
  return dataset;
}

/// Note [Shared cell clock]: `bucket_times` (world, rows, buckets, 2) of the ranks that
/// recorded a whole table with the first such rank's bucket layout; NaN elsewhere. Nothing
/// when no rank has buckets.
void write_bucket_times(hid_t group, const std::vector<RankResult>& ranks, size_t rows) {
  const auto recorded = [](const RankResult& r) {
    return !r.bucket_bytes.empty() &&
           r.bucket_times_s.size() == r.iterations() * r.bucket_bytes.size() * 2;
  };
  const auto first = std::find_if(ranks.begin(), ranks.end(), recorded);
  if (first == ranks.end()) return;
  const std::vector<int64_t>& bytes = first->bucket_bytes;
  const size_t buckets = bytes.size();
  std::vector<double> values(ranks.size() * rows * buckets * 2, kNaN);
  for (size_t g = 0; g < ranks.size(); ++g) {
    if (!recorded(ranks[g]) || ranks[g].bucket_bytes != bytes) continue;
    std::copy(ranks[g].bucket_times_s.begin(), ranks[g].bucket_times_s.end(),
              values.begin() + static_cast<std::ptrdiff_t>(g * rows * buckets * 2));
  }
  const Hdf5Handle dataset =
      h5::write_double_dataset(group, "bucket_times", {ranks.size(), rows, buckets, 2}, values);
  h5::write_string_attribute(dataset, "bucket_bytes", nlohmann::json(bytes).dump());
  h5::write_string_attribute(dataset, "columns", R"(["launched_s","completed_s"])");
}

void write_timings(hid_t group, const CellSpec& cell, const std::vector<RankResult>& ranks) {
  const std::vector<std::string> phases = phase_union(ranks);
  size_t rows = 0;
  nlohmann::json rows_per_rank = nlohmann::json::array();
  for (const auto& r : ranks) {
    rows = std::max(rows, r.iterations());
    rows_per_rank.push_back(r.iterations());
  }
  const Hdf5Handle dataset =
      write_per_phase(group, "timings", ranks, phases, rows, &RankResult::timings_s);
  h5::write_int64_attribute(
      dataset, "warmup_iterations",
      ranks.empty() ? cell.warmup_iterations : ranks.front().warmup_iterations);
  h5::write_string_attribute(dataset, "iterations_per_rank", rows_per_rank.dump());
  // Note [Shared cell clock]: written when a rank recorded it (fake and older workers don't).
  if (std::any_of(ranks.begin(), ranks.end(), [](const RankResult& r) {
        return !r.phase_starts_s.empty() && r.phase_starts_s.size() == r.timings_s.size();
      })) {
    write_per_phase(group, "phase_starts", ranks, phases, rows, &RankResult::phase_starts_s);
  }
  write_bucket_times(group, ranks, rows);
}

void write_rank_metrics(hid_t group, const std::vector<RankResult>& ranks) {
  std::set<std::string> name_set;
  for (const auto& r : ranks) {
    for (const auto& [name, value] : r.metrics) name_set.insert(name);
  }
  const std::vector<std::string> names(name_set.begin(), name_set.end());
  std::vector<double> values(ranks.size() * names.size(), kNaN);
  for (size_t g = 0; g < ranks.size(); ++g) {
    for (size_t m = 0; m < names.size(); ++m) {
      const auto it = ranks[g].metrics.find(names[m]);
      if (it != ranks[g].metrics.end()) values[g * names.size() + m] = it->second;
    }
  }
  const Hdf5Handle dataset =
      h5::write_double_dataset(group, "rank_metrics", {ranks.size(), names.size()}, values);
  h5::write_string_attribute(dataset, "names", nlohmann::json(names).dump());
}

/// A program cell's `program_argv` (each rank's command as run, a JSON list) and
/// `program_output` (each rank's output tail); "" for a rank that ran none. Nothing for
/// other cells.
void write_program_runs(hid_t group, const std::vector<RankResult>& ranks) {
  if (std::none_of(ranks.begin(), ranks.end(),
                   [](const RankResult& r) { return r.program.has_value(); })) {
    return;
  }
  std::vector<std::string> argv;
  std::vector<std::string> output;
  for (const auto& r : ranks) {
    argv.push_back(r.program ? nlohmann::json(r.program->argv).dump() : "");
    output.push_back(r.program ? r.program->output_tail : "");
  }
  h5::write_string_dataset(group, "program_argv", argv);
  h5::write_string_dataset(group, "program_output", output);
}

}  // namespace

Hdf5Handle open_or_create_cell(hid_t file, const CellSpec& cell, const std::string& commit_date,
                               bool dirty) {
  const Hdf5Handle cells = own_group(HDF5_CHECK(H5Gopen2(file, kCellsGroup, H5P_DEFAULT)));
  Hdf5Handle group = h5::has_link(cells, cell.cell_id)
                         ? own_group(HDF5_CHECK(H5Gopen2(cells, cell.cell_id.c_str(), H5P_DEFAULT)))
                         : h5::create_group(cells, cell.cell_id);
  write_spec_attributes(group, cell);
  h5::write_string_attribute(group, "commit_date", commit_date);
  h5::write_flag_attribute(group, "dirty", dirty);
  return group;
}

void drop_results(hid_t cell_group) {
  for (const char* name : {"timings", "phase_starts", "bucket_times", "rank_metrics", "rank_hosts",
                           "rank_devices", "summary", "accuracy", "probes", "probe_times",
                           "program_argv", "program_output", kValidationOutputs, "profile"}) {
    h5::delete_link_if_present(cell_group, name);
  }
  for (const auto& name : h5::attribute_names(cell_group)) {
    if (name.starts_with(kEffectivePrefix) || name == kIneffectiveReasons ||
        name == kUntrustedReasons || name.starts_with(kProgressPrefix)) {
      HDF5_CHECK(H5Adelete(cell_group, name.c_str()));
    }
  }
}

void write_progress(hid_t cell_group, const CellProgress& progress, const std::string& at) {
  h5::write_string_attribute(cell_group, "progress_stage", progress.stage);
  h5::write_int64_attribute(cell_group, "progress_done", progress.done);
  h5::write_int64_attribute(cell_group, "progress_total", progress.total);
  h5::write_string_attribute(cell_group, "progress_at", at);
}

void write_series(hid_t file, const std::vector<SeriesSummary>& series) {
  if (!h5::has_link(file, kSeriesGroup)) h5::create_group(file, kSeriesGroup);
  const Hdf5Handle all = own_group(HDF5_CHECK(H5Gopen2(file, kSeriesGroup, H5P_DEFAULT)));
  for (const auto& s : series) {
    h5::delete_link_if_present(all, s.series_id);
    const Hdf5Handle group = h5::create_group(all, s.series_id);
    h5::write_string_attribute(group, "metric", s.metric);
    h5::write_int64_attribute(group, "repetitions", s.repetitions);
    h5::write_int64_attribute(group, "completed", s.completed);
    h5::write_string_attribute(group, "cells", nlohmann::json(s.cells).dump());
    nlohmann::json medians = nlohmann::json::array();
    for (const double m : s.repetition_median_s) {
      medians.push_back(std::isfinite(m) ? nlohmann::json(m) : nlohmann::json(nullptr));
    }
    h5::write_string_attribute(group, "repetition_median_s", medians.dump());
    h5::write_double_attribute(group, "median_s", s.median_s);
    h5::write_double_attribute(group, "median_s_ci_low", s.median_interval.low);
    h5::write_double_attribute(group, "median_s_ci_high", s.median_interval.high);
    h5::write_double_attribute(group, "throughput_samples_per_s", s.throughput);
    h5::write_double_attribute(group, "throughput_ci_low", s.throughput_interval.low);
    h5::write_double_attribute(group, "throughput_ci_high", s.throughput_interval.high);
    h5::write_double_attribute(group, "spread_rel", s.spread_rel);
    h5::write_flag_attribute(group, "disagree", s.disagree);
    h5::write_double_attribute(group, "max_spread_rel", kMaxSpreadRel);
    h5::write_double_attribute(group, "confidence", kConfidence);
    h5::write_int64_attribute(group, "bootstrap_resamples", kBootstrapResamples);
    h5::write_string_attribute(group, "bootstrap_seed", std::to_string(s.seed));
  }
}

void write_effective(hid_t cell_group, const std::vector<RankResult>& ranks) {
  std::map<std::string, std::string> effective;
  std::vector<std::string> reasons;
  const auto add_reason = [&reasons](const std::string& reason) {
    if (std::find(reasons.begin(), reasons.end(), reason) == reasons.end()) {
      reasons.push_back(reason);
    }
  };
  for (const auto& rank : ranks) {
    for (const auto& [key, value] : rank.effective) {
      const auto [it, inserted] = effective.emplace(key, value);
      if (!inserted && it->second != value) {
        add_reason(key + ": the ranks differ (rank " + std::to_string(rank.world_rank) + " has " +
                   value + ", another " + it->second + ")");
      }
    }
    for (const auto& reason : rank.ineffective_reasons) add_reason(reason);
  }
  std::vector<std::string> untrusted;
  for (const auto& rank : ranks) {
    for (const auto& reason : rank.untrusted_reasons) {
      if (std::find(untrusted.begin(), untrusted.end(), reason) == untrusted.end()) {
        untrusted.push_back(reason);
      }
    }
  }
  if (!untrusted.empty()) {
    h5::write_string_attribute(cell_group, kUntrustedReasons, nlohmann::json(untrusted).dump());
  }
  if (effective.empty()) return;  // a runner that reports none (the fake one)
  for (const auto& [key, value] : effective) {
    h5::write_string_attribute(cell_group, kEffectivePrefix + key, value);
  }
  h5::write_string_attribute(cell_group, kIneffectiveReasons, nlohmann::json(reasons).dump());
}

void write_accuracy(hid_t cell_group, const std::vector<RankResult>& ranks) {
  const auto with = std::find_if(ranks.begin(), ranks.end(),
                                 [](const RankResult& rank) { return rank.accuracy.has_value(); });
  if (with != ranks.end()) write_accuracy_report(cell_group, *with->accuracy);
}

void write_accuracy_report(hid_t cell_group, const AccuracyReport& report,
                           const std::string& reference_cell) {
  h5::delete_link_if_present(cell_group, "accuracy");
  const Hdf5Handle group = h5::create_group(cell_group, "accuracy");
  h5::write_string_attribute(group, "verdict", report.verdict);
  h5::write_string_attribute(group, "failed_checks", nlohmann::json(report.failed_checks).dump());
  h5::write_string_attribute(group, "kind", report.kind);
  h5::write_string_attribute(group, "reference", report.reference);
  if (!reference_cell.empty()) h5::write_string_attribute(group, "reference_cell", reference_cell);
  for (const auto& [name, value] : report.values) {
    if (name == "validation_samples" || name == "elements" || name == "steps") {
      h5::write_int64_attribute(group, name, static_cast<int64_t>(value));
    } else {
      h5::write_double_attribute(group, name, value);
    }
  }
}

void write_validation_outputs(hid_t cell_group, const std::vector<RankResult>& ranks) {
  if (std::none_of(ranks.begin(), ranks.end(),
                   [](const RankResult& r) { return r.validation_outputs.has_value(); })) {
    return;
  }
  const Hdf5Handle group = h5::create_group(cell_group, kValidationOutputs);
  for (size_t g = 0; g < ranks.size(); ++g) {
    if (!ranks[g].validation_outputs) continue;
    const auto& outputs = *ranks[g].validation_outputs;
    const std::vector<hsize_t> dims(outputs.shape.begin(), outputs.shape.end());
    h5::write_float_dataset(group, "rank" + std::to_string(g), dims, outputs.values);
  }
}

std::vector<std::map<std::string, double>> read_rank_metrics(hid_t cell_group) {
  std::vector<std::map<std::string, double>> metrics;
  if (!h5::has_link(cell_group, "rank_metrics")) return metrics;
  const auto dims = h5::dataset_dims(cell_group, "rank_metrics");
  const auto values = h5::read_double_dataset(cell_group, "rank_metrics");
  const Hdf5Handle dataset =
      own_dataset(HDF5_CHECK(H5Dopen2(cell_group, "rank_metrics", H5P_DEFAULT)));
  const auto names = nlohmann::json::parse(h5::read_string_attribute(dataset, "names"))
                         .get<std::vector<std::string>>();
  const size_t ranks = dims.empty() ? 0 : dims[0];
  if (values.size() < ranks * names.size()) {
    throw Error("rank_metrics holds " + std::to_string(values.size()) + " values for " +
                std::to_string(ranks) + " ranks of " + std::to_string(names.size()) + " names");
  }
  metrics.resize(ranks);
  for (size_t g = 0; g < ranks; ++g) {
    for (size_t m = 0; m < names.size(); ++m) {
      const double value = values[g * names.size() + m];
      if (!std::isnan(value)) metrics[g][names[m]] = value;
    }
  }
  return metrics;
}

StoredValidation read_validation(hid_t cell_group) {
  StoredValidation out;
  out.metrics = read_rank_metrics(cell_group);
  if (h5::has_link(cell_group, "accuracy")) {
    const Hdf5Handle group = own_group(HDF5_CHECK(H5Gopen2(cell_group, "accuracy", H5P_DEFAULT)));
    AccuracyReport report;
    report.verdict = h5::read_string_attribute(group, "verdict");
    report.kind = h5::read_string_attribute(group, "kind");
    report.reference = h5::read_string_attribute(group, "reference");
    report.failed_checks = nlohmann::json::parse(h5::read_string_attribute(group, "failed_checks"))
                               .get<std::vector<std::string>>();
    const auto names = h5::attribute_names(group);
    if (std::find(names.begin(), names.end(), "reference_cell") != names.end()) {
      out.reference_cell = h5::read_string_attribute(group, "reference_cell");
    }
    out.accuracy = std::move(report);
  }
  out.outputs.resize(out.metrics.size());
  if (!h5::has_link(cell_group, kValidationOutputs)) return out;
  const Hdf5Handle group =
      own_group(HDF5_CHECK(H5Gopen2(cell_group, kValidationOutputs, H5P_DEFAULT)));
  for (size_t g = 0; g < out.outputs.size(); ++g) {
    const std::string name = "rank" + std::to_string(g);
    if (!h5::has_link(group, name)) continue;
    const auto dims = h5::dataset_dims(group, name);
    out.outputs[g].shape.assign(dims.begin(), dims.end());
    out.outputs[g].values = h5::read_float_dataset(group, name);
  }
  return out;
}

void write_status(hid_t cell_group, CellStatus status, FailurePhase phase,
                  const std::string& reason) {
  h5::write_string_attribute(cell_group, "status", to_string(status));
  h5::write_string_attribute(cell_group, "failed_phase", to_string(phase));
  h5::write_string_attribute(cell_group, "reason", reason);
}

void write_rank_datasets(hid_t cell_group, const CellSpec& cell,
                         const std::vector<RankResult>& ranks) {
  write_timings(cell_group, cell, ranks);
  write_rank_metrics(cell_group, ranks);
  std::vector<std::string> hosts;
  std::vector<std::string> devices;
  for (const auto& r : ranks) {
    hosts.push_back(r.host);
    devices.push_back(r.device);
  }
  h5::write_string_dataset(cell_group, "rank_hosts", hosts);
  h5::write_string_dataset(cell_group, "rank_devices", devices);
  write_program_runs(cell_group, ranks);
}

void write_probes(hid_t cell_group, const std::vector<RankResult>& ranks) {
  const auto with_probes = std::find_if(ranks.begin(), ranks.end(),
                                        [](const RankResult& r) { return !r.probes.empty(); });
  if (with_probes == ranks.end()) return;
  const auto& probes = with_probes->probes;
  const std::vector<std::string> columns = {"batch", "median_s", "p99_s",
                                            "throughput_samples_per_s", "peak_memory_bytes"};
  std::vector<double> values;
  std::vector<std::string> status;
  for (const auto& p : probes) {
    values.insert(values.end(), {static_cast<double>(p.batch), p.median_s, p.p99_s, p.throughput,
                                 p.peak_memory_bytes});
    status.push_back(to_string(p.status));
  }
  const Hdf5Handle dataset =
      h5::write_double_dataset(cell_group, "probes", {probes.size(), columns.size()}, values);
  h5::write_string_attribute(dataset, "columns", nlohmann::json(columns).dump());
  h5::write_string_attribute(dataset, "status", nlohmann::json(status).dump());
  size_t width = 0;
  for (const auto& p : probes) width = std::max(width, p.times_s.size());
  std::vector<double> times(probes.size() * width, kNaN);
  for (size_t row = 0; row < probes.size(); ++row) {
    std::copy(probes[row].times_s.begin(), probes[row].times_s.end(),
              times.begin() + static_cast<std::ptrdiff_t>(row * width));
  }
  h5::write_double_dataset(cell_group, "probe_times", {probes.size(), width}, times);
}

void write_summary(hid_t cell_group, const CellSummary& s) {
  const Hdf5Handle group = h5::create_group(cell_group, "summary");
  h5::write_string_attribute(group, "metric", s.metric);
  h5::write_int64_attribute(group, "batch_size", s.batch_size);
  if (const auto& f = s.batch_figures) {  // Note [Batch search]
    h5::write_int64_attribute(group, "max_batch_ok", f->max_batch_ok);
    h5::write_int64_attribute(group, "oom_batch", f->oom_batch);
    h5::write_int64_attribute(group, "best_batch", f->best_batch);
    h5::write_int64_attribute(group, "knee_batch", f->knee_batch);
    h5::write_int64_attribute(group, "slo_batch", f->slo_batch);
    h5::write_int64_attribute(group, "recommended_batch", f->recommended_batch);
    h5::write_double_attribute(group, "memory_per_sample_bytes", f->memory_per_sample_bytes);
    h5::write_double_attribute(group, "memory_budget_bytes", s.memory_budget_bytes);
  }
  h5::write_int64_attribute(group, "count", static_cast<int64_t>(s.time.count));
  const std::vector<std::pair<const char*, double>> values = {
      {"mean_s", s.time.mean},
      {"median_s", s.time.median},
      {"std_s", s.time.std},
      {"min_s", s.time.min},
      {"max_s", s.time.max},
      {"p50_s", s.time.p50},
      {"p90_s", s.time.p90},
      {"p95_s", s.time.p95},
      {"p99_s", s.time.p99},
      {"cv", s.time.cv},
      {"median_ci_low_s", s.median_ci_low_s},
      {"median_ci_high_s", s.median_ci_high_s},
      {"throughput_samples_per_s", s.throughput_samples_per_s},
      {"samples_per_s_per_worker", s.samples_per_s_per_worker},
      {"peak_memory_bytes", s.peak_memory_bytes},
      {"final_loss_mean", s.final_loss_mean},
      {"cpu_threads_per_core", s.cpu_threads_per_core},
      {"energy_j", s.energy_j},
      {"samples_per_joule", s.samples_per_joule},
  };
  for (const auto& [name, value] : values) h5::write_double_attribute(group, name, value);
  for (const auto& [phase, median_s] : s.phase_median_s) {
    h5::write_double_attribute(group, "phase_median_s_" + phase, median_s);
  }
  if (!s.stop_reason.empty()) h5::write_string_attribute(group, "stop_reason", s.stop_reason);
  if (!s.warmup_reason.empty()) {
    h5::write_string_attribute(group, "warmup_reason", s.warmup_reason);
  }
  h5::write_flag_attribute(group, "valid", s.valid);
  h5::write_flag_attribute(group, "valid_enough_iterations", s.valid_enough_iterations);
  h5::write_flag_attribute(group, "valid_cv", s.valid_cv);
  h5::write_double_attribute(group, "drift", s.drift);
  h5::write_flag_attribute(group, "valid_drift", s.valid_drift);
  h5::write_flag_attribute(group, "valid_replicas_in_sync", s.valid_replicas_in_sync);
  h5::write_int64_attribute(group, "min_valid_iterations",
                            static_cast<int64_t>(s.thresholds.min_iterations));
  h5::write_double_attribute(group, "max_valid_cv", s.thresholds.max_cv);
  h5::write_double_attribute(group, "max_valid_drift", s.thresholds.max_drift);
  h5::write_double_attribute(group, "replica_checksum_rel_tolerance",
                             s.thresholds.replica_checksum_rel_tolerance);
}

void write_string_if_absent(hid_t cell_group, const std::string& name, const std::string& value) {
  if (HDF5_CHECK(H5Aexists(cell_group, name.c_str())) == 0) {
    h5::write_string_attribute(cell_group, name, value);
  }
}

}  // namespace scalebench::results
