// A program cell: the user's own command, run by every worker rank of the cell's group in the
// branch's tree (docs/programs.md). Plain data and the pure placeholder rules.
//
// Note [Program placeholders]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each element of `command` (and each value of `env`) may hold `{name}` placeholders, replaced
// per cell by the cell's values: every key of the settings table (`{batch_size}`,
// `{precision}`, `{iterations}`, `{warmup}`, `{seed}`, `{device}`, ...) as the matrix writes
// it, and `{world_size}`, `{mode}`, `{branch}`, `{commit}`, `{experiment}`, `{cell_id}`,
// `{output_dir}` (a folder of the cell's own on the worker). `{{` and `}}` are literal braces.
// The replacement is textual and inside one argv element: nothing goes through a shell, so a
// value with `;` or `$(...)` reaches the program as those characters. An unknown name is an
// input error at `validate` (expansion checks every element against kProgramPlaceholders and
// the table); the worker substitutes with the values of the cell as it runs (`{device}` is the
// device the rank owns: cpu or cuda).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace scalebench {

struct CellSpec;

/// `program:` of an experiment. Empty `command` = not a program cell.
struct ProgramSpec {
  std::vector<std::string> command;        ///< argv template; [0] found on PATH or in the tree
  std::map<std::string, std::string> env;  ///< extra environment (templates too)
  bool operator==(const ProgramSpec&) const = default;
};

/// The placeholder names that are not keys of the settings table.
extern const std::vector<std::string> kProgramPlaceholders;

/// The names of the `{name}` placeholders of `text`, in order. Throws std::invalid_argument
/// for a '{' without its '}' or a lone '}' (write `{{`/`}}` for a literal brace).
std::vector<std::string> placeholder_names(const std::string& text);

/// Whether `name` is a placeholder a program cell can use (kProgramPlaceholders or a key of
/// the settings table).
bool is_program_placeholder(const std::string& name);

/// `text` with each placeholder replaced by values[name]. Throws std::invalid_argument naming
/// a placeholder that `values` lacks, or a malformed brace.
std::string substitute_placeholders(const std::string& text,
                                    const std::map<std::string, std::string>& values);

/// The values of a cell's placeholders, every settings-table key as the matrix writes it
/// plus the names of kProgramPlaceholders (`output_dir` and `device` as given: the worker's).
std::map<std::string, std::string> placeholder_values(const CellSpec& cell,
                                                      const std::string& output_dir,
                                                      const std::string& device);

}  // namespace scalebench
