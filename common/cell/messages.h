// The messages between the orchestrator (rank 0) and the workers, as data: what a worker says
// of itself, the cell it is handed, its result and its progress. Their tags, encoding and
// sequence are the wire contract of protocol/wire.h (Note [Orchestrator protocol]); the
// results store (results/) reads the same structs without any of MPI.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/cell/accuracy.h"
#include "common/cell/batch_search.h"
#include "common/cell/cell_outcome.h"
#include "common/cell/cell_spec.h"
#include "common/cell/op_profile.h"
#include "common/cell/output_comparison.h"

namespace scalebench {

/// Note [Cell progress]: where a long cell is, sent by its group rank 0 at most once per
/// kProgressInterval (and never for a cell that ends sooner), so that rank 0's log and the
/// results file (`progress_*` attributes of the running cell) show it.
struct CellProgress {
  std::string cell_id;
  std::string stage;  ///< "warmup", "measured" (the timed loop), "probe" (batch search)
  int64_t done = 0;   ///< iterations of this stage finished
  int64_t total = 0;  ///< iterations of this stage
  bool operator==(const CellProgress&) const = default;
};
/// Seconds between two progress messages of one cell, at least.
inline constexpr double kProgressInterval = 5.0;

/// Sent by each worker once: where it runs, so rank 0 can form groups on one node.
struct WorkerHello {
  int world_rank = -1;
  std::string host;
  int local_index = 0;    ///< index among the workers of this node (selects the GPU)
  std::string device;     ///< "cpu" or the GPU's name
  std::string cpu_model;  ///< cpu_model_name() of the worker's node ("" when unknown)
  int node_cores = 0;     ///< CPU cores of the worker's node
  bool operator==(const WorkerHello&) const = default;
};

/// One cell handed to a group. `members` are MPI_COMM_WORLD ranks, group rank order.
/// Filled by rank 0 at dispatch (orchestrator/cell_inputs.h).
struct Assignment {
  CellSpec cell;
  std::vector<int> members;
  /// Bytes of the cell's TorchScript module (`cell.model.torchscript` read by rank 0 from
  /// the branch tree), or empty for zoo models. Sent over MPI: workers need no access to
  /// rank 0's filesystem for the model.
  std::string artifact;
  /// Absolute directory that the cell's relative file paths (`data.path`, `checkpoint`)
  /// resolve against on the workers: the branch's worktree, or the matrix file's folder
  /// when the matrix has no repo. Empty: the worker's working directory.
  std::string tree;
  bool operator==(const Assignment&) const = default;
};

/// A cell's file path as Assignment::tree defines it: absolute paths stay as written,
/// relative ones are joined to `tree` (an empty tree leaves them relative to the working
/// directory). Lexically normalised; no filesystem access. Pure. Rank 0 checks the files
/// with it and the workers open them with it.
std::filesystem::path resolve_in_tree(const std::filesystem::path& tree,
                                      const std::string& relative);

/// One rank's results for one cell.
///
/// `timings_s` is row-major [iterations][phases] in seconds; its first
/// `warmup_iterations` rows are warm-up. For inference an "iteration" is a batch and
/// ranks may have different batch counts. `metrics` holds named per-rank scalars with
/// units in the name (final_loss, param_checksum, model_init_s, first_iteration_s,
/// peak_allocated_bytes, peak_reserved_bytes, peak_rss_bytes, parameter_count,
/// flops_per_sample, checkpoint_load_s, samples, loop_wall_s, ...).
/// What a rank of a program cell ran (docs/programs.md#what-is-stored).
struct ProgramInvocation {
  std::vector<std::string> argv;  ///< after placeholder substitution
  std::string output_tail;        ///< the last lines of stdout + stderr, bounded
  bool operator==(const ProgramInvocation&) const = default;
};

struct RankResult {
  std::string cell_id;
  int group_rank = 0;
  int world_rank = 0;
  std::string host;
  std::string device;
  CellStatus status = CellStatus::kOk;
  FailurePhase failed_phase = FailurePhase::kNone;
  std::string reason;
  /// The rank hit a FatalError: the group is unusable, rank 0 records the cell and ends the
  /// job (Note [Orchestrator protocol]).
  bool fatal = false;
  std::vector<std::string> phases;
  int warmup_iterations = 0;
  std::vector<double> timings_s;
  /// Note [Shared cell clock]: when each phase of each row began, seconds since the
  /// group's common origin (a barrier before the first iteration); same shape as
  /// `timings_s`, NaN where a phase did not run. Empty when the worker did not record it.
  std::vector<double> phase_starts_s;
  /// Note [Shared cell clock]: training with gradient buckets: per row, per bucket,
  /// [launched, completed] seconds since the origin on the host's clock (completed NaN where
  /// the backend does not know it), row-major [rows][bucket_bytes.size()][2]; else empty.
  std::vector<double> bucket_times_s;
  std::vector<int64_t> bucket_bytes;
  std::map<std::string, double> metrics;
  /// Note [Requested vs effective]: the effective value of each device-dependent switch
  /// (setting key -> its text) and one sentence per switch that did not take effect.
  std::map<std::string, std::string> effective;
  std::vector<std::string> ineffective_reasons;
  /// Why the cell's figures cannot be trusted although it ran to its end, one sentence each
  /// with what to change (a program cell that ran other steps than asked, or a branch's
  /// package imported from outside its tree: Note [Program steps asked and run], Note
  /// [Program code identity]). Stored as the cell's `untrusted_reasons`; the analysis counts
  /// the cell untrusted.
  std::vector<std::string> untrusted_reasons;
  /// Note [Accuracy validation]: the comparison with the reference (validate: true; the
  /// same on every rank of the group, which reduced it).
  std::optional<AccuracyReport> accuracy;
  /// Note [Batch search]: a `batch_size: auto` cell's probes in the order run, reduced over
  /// the group (the same on every rank); empty for other cells.
  std::vector<BatchProbe> probes;
  /// Note [Program cells]: a program cell's command as this rank ran it and the tail of its
  /// output; unset for other cells.
  std::optional<ProgramInvocation> program;
  /// Note [Accuracy across cells]: the outputs a program cell with `validate: true` handed
  /// (its share of the first validation_samples); unset for other cells.
  std::optional<OutputArray> validation_outputs;
  /// Note [Iterations auto]: why the measured loop ended ("fixed", "precise", "budget",
  /// "cap"; the group's decision, the same on every rank) and, for `warmup: auto`, why the
  /// warm-up did ("steady", "cap", "time"); "" where no loop ran.
  std::string stop_reason;
  std::string warmup_reason;
  /// Note [Operator profiles]: the operator table of the steps run under the profiler
  /// (`profile_steps` > 0: a built-in cell's, or a program cell's from its client's `profile`
  /// record, Note [Program profiles] in program/program_profile.h); unset otherwise.
  std::optional<OpProfile> profile;
  bool operator==(const RankResult&) const = default;

  /// Number of rows of `timings_s`.
  [[nodiscard]] size_t iterations() const {
    return phases.empty() ? 0 : timings_s.size() / phases.size();
  }
};

/// Every phase name reported by any rank, in first-seen order (ranks may differ, e.g. a
/// failed rank reports none).
std::vector<std::string> phase_union(const std::vector<RankResult>& ranks);

}  // namespace scalebench
