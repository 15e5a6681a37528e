// The HDF5 results file: written only by rank 0, one group per cell, layout versioned
// and documented in schemas/results-layout.md (implemented here exactly).
#pragma once

#include <hdf5.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/cell/cell_spec.h"
#include "common/cell/messages.h"
#include "common/cell/repetition_stats.h"
#include "common/hdf5/check.h"
#include "results/cells.h"
#include "results/provenance.h"

namespace scalebench {

/// Value of the root attribute `scalebench_layout_version`, and its major part.
inline constexpr const char* kResultsLayoutVersion = "1.10";
inline constexpr int kResultsLayoutMajor = 1;

/// What the file says about one cell (enough for --resume to decide skip or retry).
struct StoredCell {
  std::string cell_id;
  CellStatus status = CellStatus::kRunning;
  std::string reason;
  std::string failed_phase;
  std::string spec_json;  ///< the `spec` attribute: to_json(CellSpec).dump()
};

/// What the results file records about a benchmarked commit besides its id (the cell
/// attributes `commit_date` and `dirty`). See docs/branches.md.
struct CommitInfo {
  std::string date_iso;  ///< committer date, strict ISO 8601
  bool dirty = false;    ///< see ResolvedBranch::dirty in matrix/git_repo.h
};

// Note [Results durability]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Guarantee: the results file on disk is ALWAYS a complete, closed, readable HDF5 file,
// whatever instant the writing process is SIGKILLed (or the node loses power, given a
// filesystem that honours fsync), and a cell that a call reported written is never lost.
//
// HDF5 1.10 has no journal: a file open for writing is inconsistent on disk until
// H5Fclose, and a killed writer can leave it unreadable. So the store never keeps the
// file open. Each mutation (one public call, or every call inside one `batch`):
//   1. copies the current file to the sibling `<name>.tmp-<pid>` (a reflink where the
//      filesystem supports FICLONE, else copy_file_range), created first with the file's
//      permission bits and group (durable::create_temp_like), so that the rename keeps
//      what the owner set (a chmod 600 survives every update) and the copy is never
//      readable by more users than the file;
//   2. opens the copy, applies the change, H5Fclose()s it (flushes everything);
//   3. fsync()s the copy, rename()s it over the original (atomic within a directory),
//      fsync()s the directory.
// A kill before step 3's rename leaves the original untouched plus a stale temporary,
// which the next create/open_for_resume removes (when its pid is no longer running);
// a kill after it leaves the new file. Readers (h5py, h5dump, `scalebench info`) can
// open the file at any time during a run and see the last committed state.
//
// Cost: O(file size) per mutation (copy + two fsyncs). docs/results-file.md gives the
// measured figure. Rank 0 therefore commits its records in groups from a writer thread
// (Note [Group commit] in orchestrator/group_commit_sink.h), so the number of copies does
// not grow with the number of cells. Alternatives considered: SWMR (1.10) does not make a killed
// writer's file safe for metadata changes like new groups; one file per cell would make every
// reader assemble the run. The copy is cheap relative to a benchmark cell.

/// Rank 0's writer of the results file. Not thread-safe. Movable, not copyable. Every
/// mutating call is durable when it returns (see Note [Results durability]); failures
/// throw Hdf5Error or LibraryError("OS") and leave the file as it was before the call.
class ResultsStore {
 public:
  /// New file with the root attributes of `provenance` (layout version, run_count 1,
  /// end_time "") and an empty `/cells`. Throws InputError "results file X exists; pass
  /// --force to overwrite or --resume to continue" when it exists and !force. With force
  /// the old file stays intact until the new one replaces it atomically. Creates missing
  /// parent directories. InputError when `path` is a directory (with force too). Replacing
  /// keeps the old file's permissions; a new file follows the umask.
  static ResultsStore create(const std::filesystem::path& path, const Provenance& provenance,
                             bool force);

  /// Existing file for --resume. InputError when it does not exist, is not HDF5 or not a
  /// scalebench file, has another layout major version ("required 1, found N"), or its
  /// `matrix_hash` differs from `expected_matrix_hash` (the matrix changed). Then
  /// increments `run_count` and sets `end_time` to "".
  static ResultsStore open_for_resume(const std::filesystem::path& path,
                                      const std::string& expected_matrix_hash);

  ResultsStore(ResultsStore&&) noexcept;
  ResultsStore& operator=(ResultsStore&&) noexcept;
  ResultsStore(const ResultsStore&) = delete;
  ResultsStore& operator=(const ResultsStore&) = delete;
  ~ResultsStore();

  /// Every cell in the file, by cell id (the committed state).
  [[nodiscard]] std::map<std::string, StoredCell> cells() const;

  /// Dispatched: writes the spec attributes, status `running`, `started_at` = now,
  /// `ranks` (MPI_COMM_WORLD ranks, group order), and drops results of an earlier run of
  /// the same cell (a retry on --resume).
  /// `at` (ISO 8601 UTC) is when it happened: every call below takes it, so that a record
  /// committed later (Note [Group commit] in orchestrator/group_commit_sink.h) keeps the
  /// time of the event.
  void mark_running(const CellSpec& cell, const std::vector<int>& ranks,
                    const std::string& at = iso8601_utc_now());

  /// Not run (e.g. needs more workers than the job has): status `skipped` + `reason`.
  void mark_skipped(const CellSpec& cell, const std::string& reason,
                    const std::string& at = iso8601_utc_now());

  /// Results arrived from every rank (`ranks` in group order): writes `timings`,
  /// `rank_metrics`, `rank_hosts`, `rank_devices`, `summary` (see summarize_cell) and the
  /// status: ok only when every rank is ok, else the first non-ok rank's status, phase
  /// and reason. Throws Error for an empty `ranks`.
  void complete_cell(const CellSpec& cell, const std::vector<RankResult>& ranks,
                     const std::string& at = iso8601_utc_now());

  /// A cell that ended without results (timeout seen by rank 0, interrupted): status,
  /// failed_phase, reason and finished_at only; earlier datasets of the cell are dropped.
  void finish_cell_without_results(const CellSpec& cell, CellStatus status, FailurePhase phase,
                                   const std::string& reason,
                                   const std::string& at = iso8601_utc_now());

  /// Commit id -> CommitInfo, written as the `commit_date` and `dirty` attributes of every
  /// cell whose `commit` is a key (cells of other commits get "" and 0). Call before the
  /// first cell is written; not itself a mutation of the file.
  void set_commit_info(std::map<std::string, CommitInfo> commit_info);

  /// Note [Cell progress]: the running cell's `progress_stage`, `progress_done`,
  /// `progress_total` and `progress_at` (dropped again when the cell finishes).
  void record_progress(const CellSpec& cell, const CellProgress& progress,
                       const std::string& at = iso8601_utc_now());

  /// Note [Repetitions]: writes `/series/<series_id>` for each of `series` (replacing what
  /// was there), as one update.
  void write_series(const std::vector<SeriesSummary>& series);

  /// Root attribute `order_seed` (decimal): the seed of the run's dispatch order
  /// (orchestrator/dispatch_order.h).
  void set_order_seed(uint64_t seed);

  /// Root attribute `commit_log`: the writer's commits as JSON text (Note [Group commit]).
  void set_commit_log(const std::string& commit_log_json);

  /// Note [Accuracy across cells]: the per-rank outputs and metrics of stored cell `cell_id`
  /// (empty when the file has no such cell).
  [[nodiscard]] results::StoredValidation validation(const std::string& cell_id) const;

  /// Note [Accuracy across cells]: the `accuracy` subgroup of `cell` from a comparison with
  /// the stored cell `reference_cell`, and `effective_validate` true.
  void record_cross_cell_accuracy(const CellSpec& cell, const AccuracyReport& report,
                                  const std::string& reference_cell);

  /// Note [Accuracy across cells]: `cell` could not be compared: `effective_validate` false
  /// and `reason` added to its `ineffective_reasons`.
  void record_not_compared(const CellSpec& cell, const std::string& reason);

  /// Sets the root `end_time` (ISO 8601 UTC).
  void set_end_time(const std::string& iso_time);

  /// Runs `body`, and commits every mutation it makes as ONE update (one copy, one
  /// rename): all or nothing. If `body` throws, the file is left as before and the
  /// exception propagates. Nested calls join the outer batch. cells() inside a batch
  /// sees the committed state, not the pending one.
  void batch(const std::function<void()>& body);

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  struct PendingUpdate;
  explicit ResultsStore(std::filesystem::path path);
  /// Applies `change` to the file (id of the open copy) inside the current batch, or as
  /// its own update.
  void mutate(const std::function<void(hid_t file)>& change);
  /// results::open_or_create_cell with this store's CommitInfo of the cell's commit.
  [[nodiscard]] Hdf5Handle open_cell(hid_t file, const CellSpec& cell) const;

  std::filesystem::path path_;
  std::unique_ptr<PendingUpdate> pending_;  ///< non-null inside batch()
  std::map<std::string, CommitInfo> commit_info_;
};

}  // namespace scalebench
