// Writing and reading the `/cells/<cell_id>` groups of the results file: the layout of
// schemas/results-layout.md, section "/cells". Internal to the results store (used by
// results_store.cc); every function takes an open file id.
#pragma once

#include <hdf5.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/cell/cell_spec.h"
#include "common/cell/messages.h"
#include "common/cell/repetition_stats.h"
#include "common/hdf5/check.h"
#include "results/cell_summary.h"

namespace scalebench::results {

/// Name of the group holding the cells.
inline constexpr const char* kCellsGroup = "cells";
/// Name of the group holding the series of repeated cells (Note [Repetitions]).
inline constexpr const char* kSeriesGroup = "series";
/// Prefix of the running cell's progress attributes (Note [Cell progress]).
inline constexpr const char* kProgressPrefix = "progress_";
/// Subgroup of a cell's handed outputs (Note [Accuracy across cells]).
inline constexpr const char* kValidationOutputs = "validation_outputs";

/// Opens `/cells/<id>`, creating it when missing. Always (re)writes the spec attributes,
/// and `commit_date` / `dirty` (the benchmarked commit's date and dirty flag; "" and false
/// when the matrix has no repo).
Hdf5Handle open_or_create_cell(hid_t file, const CellSpec& cell, const std::string& commit_date,
                               bool dirty);

/// Deletes the cell's datasets, summary and progress (results of an earlier attempt).
void drop_results(hid_t cell_group);

/// Note [Requested vs effective]: attributes `effective_<key>` (the effective value of each
/// device-dependent switch) and `ineffective_reasons` (a JSON list of sentences, also
/// naming switches whose effect differed between ranks). Nothing when the ranks report no
/// effects. Also `untrusted_reasons` (kUntrustedReasons) when a rank has any.
inline constexpr const char* kEffectivePrefix = "effective_";
/// What the stored spec holds in place of a program `env` value whose name the environment
/// allowlist does not admit (it may be a secret).
inline constexpr const char* kNotStoredValue = "<not stored>";
/// Attribute of a repeated cell (repetitions > 1), since layout 1.9: the id of its series (Note
/// [Repetitions]), computed from the spec as run, not from the stored one.
inline constexpr const char* kSeriesIdAttribute = "series_id";
inline constexpr const char* kIneffectiveReasons = "ineffective_reasons";
/// Since layout 1.9: the ranks' `untrusted_reasons` (RankResult), a JSON list; absent when
/// there are none.
inline constexpr const char* kUntrustedReasons = "untrusted_reasons";
void write_effective(hid_t cell_group, const std::vector<RankResult>& ranks);

/// Note [Accuracy validation]: the `accuracy` subgroup (schemas/results-layout.md) from the
/// first rank that reports a comparison (every rank of the group computed the same one).
/// Nothing when no rank reports one.
void write_accuracy(hid_t cell_group, const std::vector<RankResult>& ranks);

/// The `accuracy` subgroup of `report`, replacing one that is there; `reference_cell` (the
/// baseline cell's id, Note [Accuracy across cells]) as its attribute of that name when
/// not empty.
void write_accuracy_report(hid_t cell_group, const AccuracyReport& report,
                           const std::string& reference_cell = "");

/// Note [Accuracy across cells]: subgroup `validation_outputs` with a float32 dataset
/// `rank<g>` for each rank g that handed outputs; nothing when none did.
void write_validation_outputs(hid_t cell_group, const std::vector<RankResult>& ranks);

/// What a stored cell holds for a comparison across cells: per rank (group order), its
/// validation outputs (empty where it handed none) and its rank metrics by name.
struct StoredValidation {
  std::vector<OutputArray> outputs;
  std::vector<std::map<std::string, double>> metrics;
  /// The cell's `accuracy` group as stored (verdict, failed_checks, kind, reference; values
  /// not read), and its `reference_cell` ("" for a comparison inside the cell).
  std::optional<AccuracyReport> accuracy;
  std::string reference_cell;
};
StoredValidation read_validation(hid_t cell_group);

/// The `rank_metrics` of a stored cell: per rank, metric name -> value (NaN left out); empty
/// when the cell has none. Throws Error where the dataset or its names are damaged.
std::vector<std::map<std::string, double>> read_rank_metrics(hid_t cell_group);

/// Writes `status`, `failed_phase`, `reason`.
void write_status(hid_t cell_group, CellStatus status, FailurePhase phase,
                  const std::string& reason);

/// Writes `timings`, `rank_metrics`, `rank_hosts`, `rank_devices` of `ranks` (group order).
void write_rank_datasets(hid_t cell_group, const CellSpec& cell,
                         const std::vector<RankResult>& ranks);

/// Note [Batch search]: the `probes` dataset of a batch_size auto cell (from the first rank
/// that has probes; all hold the same); nothing for other cells.
void write_probes(hid_t cell_group, const std::vector<RankResult>& ranks);

/// Writes the `summary` subgroup.
void write_summary(hid_t cell_group, const CellSummary& summary);

/// Note [Cell progress]: the `progress_*` attributes of a running cell.
void write_progress(hid_t cell_group, const CellProgress& progress, const std::string& at);

/// Note [Repetitions]: `/series/<id>` of each of `series`, replacing an earlier one.
void write_series(hid_t file, const std::vector<SeriesSummary>& series);

/// Sets a string attribute only when the cell group does not have it yet.
void write_string_if_absent(hid_t cell_group, const std::string& name, const std::string& value);

}  // namespace scalebench::results
