// A program cell: the user's own command, run by every worker rank of the cell's group in the
// branch's tree (docs/programs.md). Plain data and the pure placeholder rules.
//
// Note [Program placeholders]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each element of `command` (and each value of `env`) may hold `{name}` placeholders, replaced
// per cell by the cell's values: every key of the settings table (`{batch_size}`,
// `{precision}`, `{iterations}`, `{warmup}`, `{seed}`, `{device}`, ...) as the matrix writes
// it, and `{world_size}`, `{local_world_size}` and `{num_nodes}` (the group's layout over
// hosts, as torchrun counts them), `{steps}` (warm-up + measured iterations, + `profile_steps`
// when set: what a framework's `max_steps` must be), `{mode}`, `{branch}`, `{commit}`,
// `{experiment}`, `{cell_id}`,
// `{output_dir}` (a folder of the cell's own on the worker), `{python}` (the experiment's
// `python:`, else `python3`). `{{` and `}}` are literal braces.
// The replacement is textual and inside one argv element: nothing goes through a shell, so a
// value with `;` or `$(...)` reaches the program as those characters. An unknown name is an
// input error at `validate` (expansion checks every element against kProgramPlaceholders and
// the table); the worker substitutes with the values of the cell as it runs (`{device}` is the
// device the rank owns: cpu or cuda).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace scalebench {

struct CellSpec;

/// What `preflight:` of a program runs (Note [Program preflight] in
/// program/preflight/program_preflight.h).
enum class PreflightKind {
  kNone,     ///< no check (the default: a plain program has no compose-only mode)
  kHydra,    ///< the program's own command with `--cfg job` appended (a Hydra app)
  kCommand,  ///< `PreflightSpec::command`, a template of the user's own
};

/// "none", "hydra", "command".
std::string to_string(PreflightKind kind);

/// `preflight:` and `preflight_timeout_s:` of a program: a check run once per distinct
/// configuration on rank 0 before any cell (Note [Program preflight]).
struct PreflightSpec {
  PreflightKind kind = PreflightKind::kNone;
  std::vector<std::string> command;  ///< kCommand: argv template, placeholders as `command`'s
  double timeout_s = 60.0;           ///< per check; past it the check fails
  bool operator==(const PreflightSpec&) const = default;
};

/// `program:` of an experiment. Empty `command` = not a program cell.
struct ProgramSpec {
  std::vector<std::string> command;        ///< argv template; [0] found on PATH or in the tree
  std::map<std::string, std::string> env;  ///< extra environment (templates too)
  /// `python:` the interpreter of the user's environment ("" = none): it replaces a
  /// command[0] of `python` or `python3`, is the value of `{python}`, and its folder comes
  /// first on PATH. A relative path in a matrix is made absolute from the matrix's folder.
  std::string python;
  /// Rank 0's check before any cell. Not part of the cell's identity, not sent to the
  /// workers, not in the cell's stored spec (the stored matrix text has it): how a
  /// configuration is checked does not change what is measured.
  PreflightSpec preflight;
  bool operator==(const ProgramSpec&) const = default;
};

/// Prefixes of the launcher's environment variables (MPI, PMIx, Slurm, ...) that a program
/// must not see: started under mpirun, it would take itself for an MPI rank.
extern const std::vector<std::string> kLauncherEnvironmentPrefixes;

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

/// `text` with `{` and `}` doubled: a literal for substitute_placeholders.
std::string escape_braces(const std::string& text);

/// `text` with the placeholders named in `values` replaced (their values' braces escaped)
/// and everything else, other placeholders and `{{`/`}}` included, left as written: a first
/// pass before the cell's own substitution (a CytoDL row's columns, Note [CytoDL program
/// rows] in matrix/cytodl.cc).
std::string substitute_known_placeholders(const std::string& text,
                                          const std::map<std::string, std::string>& values);

/// The values of a cell's placeholders, every settings-table key as the matrix writes it
/// plus the names of kProgramPlaceholders (`output_dir` and `device` as given: the worker's).
std::map<std::string, std::string> placeholder_values(const CellSpec& cell,
                                                      const std::string& output_dir,
                                                      const std::string& device);

/// The interpreter of `program`: its `python` (a path, or a name looked up on PATH),
/// "python3" when not given.
std::string program_interpreter(const ProgramSpec& program);

/// The command as run: each element substituted with `values` (and `{python}` = the
/// interpreter), then a command[0] of `python` or `python3` replaced by the interpreter when
/// `python:` is given. Throws std::invalid_argument like substitute_placeholders.
std::vector<std::string> program_argv(const ProgramSpec& program,
                                      std::map<std::string, std::string> values);

/// The preflight command as run (Note [Program preflight]): kHydra, program_argv followed by
/// `--cfg` `job`; kCommand, the preflight template substituted and its command[0] replaced
/// like program_argv's; kNone, empty. Throws std::invalid_argument like program_argv.
std::vector<std::string> preflight_argv(const ProgramSpec& program,
                                        const std::map<std::string, std::string>& values);

/// PATH as if `python:`'s environment were activated: the interpreter's folder, then
/// `caller_path`; nullopt when `program` has no `python:` with a folder (PATH unchanged).
std::optional<std::string> activated_path(const ProgramSpec& program,
                                          const std::string& caller_path);

}  // namespace scalebench
