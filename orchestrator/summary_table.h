// The end-of-run table (in the style of nccl-tests' output) and the view of a results
// file that `scalebench info` prints. Both are built from read_results_overview().
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace scalebench {

/// One line of the table: a cell and its summary. Times in seconds; NaN = not measured.
struct SummaryRow {
  std::string cell_id;
  std::string branch;
  std::string experiment;
  std::string mode;
  long long batch_size = 0;  ///< the spec's; 0 (kBatchAuto) for batch_size auto
  /// batch_size auto: the batch the search chose (summary `batch_size`), else 0.
  long long chosen_batch = 0;
  long long world_size = 0;
  long long repetition = 0;   ///< Note [Repetitions]: which run of the cell
  long long repetitions = 1;  ///< runs of the cell the matrix asked for
  /// The precision and the non-default settings of the cell's label ("bf16",
  /// "fp32/channels_last=true"): what tells apart cells of one experiment, mode and batch.
  std::string variant;
  std::string metric;  ///< "step" (train) or "batch" (infer); "" without a summary
  double median_s = 0.0;
  double throughput_samples_per_s = 0.0;
  std::optional<bool> valid;  ///< nullopt without a summary
  /// Why a cell with a summary is not trusted ("cv 18.0% > 10%; ..."), the words of the
  /// analysis's trust table (tables/quality.py); "" when trusted or without a summary.
  std::string untrusted_because;
  /// Note [Accuracy validation]: "passed", "FAIL <first failed check>", "" when the cell
  /// was not validated.
  std::string accuracy;
  /// Note [CPU oversubscription] (results/cell_summary.cc): busy CPU threads per core of the
  /// most loaded node; NaN when not recorded.
  double cpu_threads_per_core = 0.0;
  /// The cell's label (cell_label: branch, experiment, mode, batch, world, variant), or its id
  /// where the stored spec cannot be read back: how warnings name the cell.
  std::string label;
  /// The spec's cpu_threads (0: auto, the node's cores / its workers).
  long long cpu_threads = 0;
  std::string status;
  std::string reason;
};

/// Rows of the cells of an overview (read_results_overview), sorted by branch, experiment,
/// mode, world size, batch size. Missing
/// summaries give NaN times and no validity.
std::vector<SummaryRow> summary_rows(const nlohmann::json& overview);

/// Number of cells per status ("ok", "failed", ...).
std::map<std::string, size_t> status_counts(const std::vector<SummaryRow>& rows);

/// The nccl-tests style table: '#' header lines, right-aligned columns (branch,
/// experiment, mode, batch, world, metric, median time in ms, samples/s, valid,
/// status), one line per cell, then a '#' footer with the status counts and, for
/// non-ok cells, their reasons. Pure.
std::string format_summary_table(const std::vector<SummaryRow>& rows);

/// Note [Repetitions]: one line per series of repeated cells of `overview` (median over the
/// repetitions with its 95 % bootstrap interval, for the time and the throughput, the
/// spread, DISAGREE when the repetitions disagree), then a '#' warning naming the
/// disagreeing series; "" when the overview has no repeated cells. Pure.
std::string format_series_table(const nlohmann::json& overview);

/// The stable JSON of `scalebench info --format json` (see docs/user-guide.md):
/// {"file", "provenance", "counts", "cells": [...], "series": [...], "damaged_cells":
/// [{"cell_id", "problem"}], "problems": [...]}. Pure.
nlohmann::json info_json(const std::string& file, const nlohmann::json& overview);

/// One '#' line per damaged part of an overview: "# damaged cell <id>: <problem>" and
/// "# damaged: <problem>" for the root; "" when there is none. Pure.
std::string format_damage(const nlohmann::json& overview);

/// "# MFU ..." lines, one per cell whose model FLOPs are known (results/model_flops.h):
/// achieved TFLOP/s, and on a GPU of the peak table its peak and MFU; "" when no cell has
/// FLOPs. Without `achieved_only_rows`, cells with no MFU (a CPU, an unknown GPU) are left
/// out (the end of `scalebench run`; `info` shows them all).
std::string format_mfu(const nlohmann::json& overview, bool achieved_only_rows = true);

/// Note [Run-level segments]: one line per ok program cell that has `program_times`: its
/// wall time, launch to the first step, the steps' span, after the last step (seconds, median
/// over ranks) and its three longest named segments; "" when no cell has them. Pure.
std::string format_program_times(const nlohmann::json& overview);

}  // namespace scalebench
