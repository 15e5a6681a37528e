// "What the user asked": a matrix file parsed into plain structs, before expansion.
//
// Both readers (YAML, CytoDL CSV) produce a MatrixRequest; `expand_matrix` turns it into
// cells. Every value remembers where it was written, so semantic errors point at the key.
// See Note [Matrix defaults] for where defaults come from.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/base/diagnostics.h"
#include "common/cell/cell_spec.h"
#include "common/cell/settings.h"
#include "matrix/matrix.h"

namespace scalebench {

// Note [Matrix defaults]
// ~~~~~~~~~~~~~~~~~~~~~~
// A value not given in the file comes, in this order, from the experiment, the matrix's
// `defaults` (or `sweep` for the axes), and finally CellSpec's member initialisers in
// common/cell/cell_spec.h, which are the one place scalar defaults live (warmup 2, iterations
// 10, seed 0, timeout 600 s, fp32, device auto, ...; docs/matrix-reference.md lists them
// from the settings table). The axes default to the single value of that CellSpec
// default (world size 1, fp32, train); batch sizes have no default and must be given.

/// Absurd-size limit of one input sample: more elements are rejected as a typo. (The
/// settings' limits are in the settings table, common/cell/settings_table.cc.)
inline constexpr int64_t kMaxInputElements = int64_t{1} << 31;

/// A value and where it was written (`where.line == 0` when it was not written).
template <typename T>
struct Setting {
  std::optional<T> value;
  SourceLocation where;
};

/// The settings written in `defaults`/`sweep` or in one experiment, by the key of their
/// row in the settings table (Note [Settings table]): an axis holds its list, any other
/// setting one value. A key that is absent was not written.
struct SettingsRequest {
  std::map<std::string, Setting<std::vector<SettingValue>>> values;

  /// The setting `key` if written, else nullptr.
  [[nodiscard]] const Setting<std::vector<SettingValue>>* find(const std::string& key) const {
    const auto it = values.find(key);
    return it == values.end() ? nullptr : &it->second;
  }
};

struct ExperimentRequest {
  SourceLocation where;  ///< the experiment's entry (row, for CSV)
  std::string name;
  ModelSpec model;
  SourceLocation model_where;
  ProgramSpec program;  ///< `program:` (docs/programs.md); empty command = none
  SourceLocation program_where;
  Setting<std::vector<int64_t>> input_shape;
  Setting<int64_t> num_classes;
  DataSpec data;
  std::string checkpoint;
  SettingsRequest settings;
  std::optional<std::string> only_branch;          ///< CSV rows name one branch; YAML: all branches
  Setting<std::vector<std::string>> prepare_argv;  ///< `prepare`
  Setting<double> prepare_timeout_s;
  /// `experiment: <name>` (YAML): the experiment is configs/experiment/<name>.yaml in each
  /// branch's tree, and the other keys of this entry override that file's (see
  /// matrix/tree_experiments.h). Empty for an inline experiment.
  std::string tree_name;
  SourceLocation tree_where;           ///< where `experiment:` is written
  std::set<std::string> written_keys;  ///< the keys of the entry (YAML), for overriding
};

/// Removes the cells that match every key that is set.
struct ExcludeRule {
  SourceLocation where;
  std::optional<std::string> experiment;
  std::optional<std::string> branch;
  std::map<std::string, SettingValue> settings;  ///< axis setting key -> value
};

struct MatrixRequest {
  std::string file;  ///< for messages
  std::string name;
  std::string repo;
  std::vector<std::string> branches;
  std::vector<SourceLocation> branch_where;  ///< each branch's line:column (YAML), else empty
  std::string scheduling = "exclusive";
  BaselineSpec baseline;                           ///< `baseline:`
  Setting<std::vector<std::string>> prepare_argv;  ///< top-level `prepare`
  Setting<double> prepare_timeout_s;
  SettingsRequest defaults;  ///< `defaults` and `sweep`
  std::vector<ExperimentRequest> experiments;
  std::vector<ExcludeRule> excludes;
};

/// Expands `request` into finalized cells (branches x experiments x modes x batch sizes x
/// world sizes x precisions, minus excludes), checking every semantic rule (models,
/// shapes, sizes against `limits`, duplicates). Each cell's `commit` is its branch's entry
/// in `commits` (ref -> commit; "" where absent, as when only validating) and is set before
/// its id is computed, once. Problems go to `diagnostics`; cells are returned only for what
/// could be resolved. Tree experiments (`tree_name` set) are left out, and while there are
/// any, an exclude rule matching nothing is not warned about (resolve_matrix expands them,
/// and checks the rules, once their files are read). Pure.
std::vector<CellSpec> expand_matrix(const MatrixRequest& request, const MatrixLimits& limits,
                                    const std::map<std::string, std::string>& commits,
                                    Diagnostics& diagnostics);

/// Reads a YAML matrix (text already checked for encoding) into a request.
MatrixRequest read_yaml_matrix(const std::string& text, const std::string& file,
                               Diagnostics& diagnostics);

/// Reads one experiment document (a branch tree's configs/experiment/<name>.yaml) with
/// the same checks, schema (experiment.schema.json) and reader as an inline entry of
/// `experiments`; `file` names it in messages. Returns nothing when a problem was added.
std::optional<ExperimentRequest> read_yaml_experiment(const std::string& text,
                                                      const std::string& file,
                                                      Diagnostics& diagnostics);

/// Reads a program template (schemas/program-template.schema.json: the `program:` of an
/// experiment as a file of its own; docs/programs.md#cytodl-task-files). Returns nothing when
/// a problem was added to `diagnostics`.
std::optional<ProgramSpec> read_program_template(const std::string& text, const std::string& file,
                                                 Diagnostics& diagnostics);

/// Reads a CytoDL train or inference task CSV into a request; sets `format` to
/// "cytodl-train-csv" or "cytodl-infer-csv". With a program template next to it
/// (`<stem>.program.yaml`, read by read_program_template), each row runs that program on its
/// branch (Note [CytoDL program rows] in cytodl.cc); without, each row is a built-in stand-in.
MatrixRequest read_cytodl_csv(const std::string& text, const std::string& file, std::string& format,
                              Diagnostics& diagnostics);

}  // namespace scalebench
