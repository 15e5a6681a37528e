// The matrix file front end: read a matrix (YAML, or a CytoDL train/infer CSV task file),
// validate it (JSON Schema + syntax checks + semantic checks) and expand it into cells.
//
// Contract: `load_matrix` is a pure function of the file's bytes and `limits` (it reads
// the file and nothing else; no git, no MPI). Either it returns every cell, finalized
// (cell_id set, model defaults resolved), or it throws MatrixError listing ALL problems
// found, one per line. Nothing about a matrix is checked later that could be checked here.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/base/diagnostics.h"
#include "common/base/error.h"
#include "common/cell/cell_spec.h"

namespace scalebench {

/// Limits that depend on the machine or the user's flags, not on the file.
struct MatrixLimits {
  int max_world_size = 1024;  ///< world sizes above are "impossible" (validate --max-world-size)
};

/// A `prepare:` step: run once per branch in the branch's worktree (see docs/branches.md).
struct PrepareSpec {
  std::vector<std::string> argv;  ///< empty = no prepare step
  double timeout_s = 600.0;
  bool operator==(const PrepareSpec&) const = default;
};

/// `baseline:` (Note [Accuracy across cells] in common/cell/output_comparison.h): the cell
/// a validating program cell is compared with.
struct BaselineSpec {
  std::string branch;                ///< "" = `reference`: same branch, fp32, switches off
  std::vector<std::string> metrics;  ///< scalebench_client.metric names compared
  bool operator==(const BaselineSpec&) const = default;
};

struct MatrixRequest;

/// A loaded, expanded matrix.
struct ExpandedMatrix {
  std::filesystem::path path;         ///< the file as given
  std::string text;                   ///< the file's bytes as read
  std::string format;                 ///< "yaml", "cytodl-train-csv" or "cytodl-infer-csv"
  std::string name;                   ///< matrix name (file stem if the file has none)
  std::string repo;                   ///< "" when the matrix has no repo
  std::vector<std::string> branches;  ///< as written; empty when no repo
  /// Where each branch is written (line:column); empty or shorter when not known (CSV).
  std::vector<SourceLocation> branch_where;
  std::string scheduling;  ///< "exclusive" (default) or "packed"
  PrepareSpec prepare;     ///< top-level `prepare` / `prepare_timeout_s`
  BaselineSpec baseline;   ///< top-level `baseline`
  /// Experiments whose own `prepare` or `prepare_timeout_s` replaces the top-level one.
  std::map<std::string, PrepareSpec> experiment_prepare;
  /// Finalized (cell_id set); `source` = "file:line". From load_matrix alone the commits
  /// are empty (the file is only checked); resolve_matrix gives the cells with their commits.
  std::vector<CellSpec> cells;
  std::vector<std::string> warnings;  ///< non-fatal findings (e.g. exclude rules matching nothing)
  /// `experiments` entries `{experiment: <name>, ...}`, in file order: their file is read
  /// from each branch's tree, so their cells are in `cells` only once resolve_matrix
  /// (matrix/resolved_matrix.h) has read them (plan, submit, run).
  std::vector<std::string> tree_experiments;
  bool tree_experiments_resolved = false;
  /// What the file asked, and the limits it was expanded with (for resolve_tree_experiments).
  std::shared_ptr<const MatrixRequest> request;
  MatrixLimits limits;
};

/// Every problem of one matrix file, one per line: "file:line:column: key.path: what is
/// wrong; what to change".
class MatrixError : public InputError {
 public:
  using InputError::InputError;
};

/// Reads, schema-validates, semantically checks and expands the matrix at `path`. The
/// format is chosen by extension (.yaml/.yml, .csv: train or infer by its header). On any
/// problem throws MatrixError whose what() lists ALL problems.
ExpandedMatrix load_matrix(const std::filesystem::path& path, const MatrixLimits& limits = {});

/// Same, for text already in memory (`path` is used for messages and the format only).
ExpandedMatrix load_matrix_text(const std::filesystem::path& path, const std::string& text,
                                const MatrixLimits& limits = {});

/// The prepare step of `cell`'s experiment: its own, else the matrix's top-level one.
const PrepareSpec& prepare_of(const ExpandedMatrix& matrix, const CellSpec& cell);

/// One-line summary for `scalebench validate`: "12 cells (2 experiments, 2 modes, ...)".
std::string summarize(const ExpandedMatrix& matrix);

}  // namespace scalebench
