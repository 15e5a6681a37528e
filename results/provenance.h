// Provenance of a run: everything the root attributes of the results file record about
// the tool, the libraries, the machines and the input (schemas/results-layout.md, `/`).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace scalebench {

struct Provenance {
  std::string tool_version;
  std::string tool_commit;  ///< "" when the build had no git checkout
  bool tool_dirty = false;
  std::string build_type;
  std::string torch_version;  ///< set by the caller that links LibTorch; "" otherwise
  std::string cuda_version;   ///< set by the caller; "" on a CPU build
  std::string nccl_version;   ///< set by the caller; "" without NCCL
  std::string mpi_version;    ///< MPI_Get_library_version, first line
  /// The thread level MPI granted (MPI_THREAD_MULTIPLE lets the MPI backend run its
  /// communication thread; docs/metrics.md#cpu-threads-and-the-backward--comm_wait-split);
  /// "" before MPI_Init.
  std::string mpi_thread_level;
  std::string hdf5_version;        ///< H5get_libversion, "1.10.8"
  std::vector<std::string> hosts;  ///< distinct hostnames of the job (set by the caller)
  std::string devices = "[]";      ///< JSON list of {"rank","host","device"} (set by the caller)
  int mpi_size = 0;
  std::vector<std::string> argv;
  std::string matrix_path;
  std::string matrix_text;
  std::string matrix_hash;  ///< see matrix_hash()
  int64_t cell_count = 0;   ///< cells of the matrix (repetitions count)
  /// The matrix's warnings ("file:line:col: warning: ..."), e.g. that a CytoDL task file runs
  /// built-in stand-ins: `info` and the report repeat them (Note [CytoDL program rows]).
  std::vector<std::string> matrix_warnings;
  std::map<std::string, std::string> environment;  ///< allowlisted only
  std::string start_time;                          ///< ISO 8601 UTC
};

/// Fills what common/ can know: tool version/commit/dirty/build type (build_info.h), MPI
/// and HDF5 library versions, the allowlisted environment of this process, the start
/// time, and the given argv, matrix, hash of `cell_ids` and `mpi_size`. Torch, CUDA,
/// NCCL versions, hosts and devices are left for the caller. Safe before MPI_Init.
Provenance collect_provenance(const std::vector<std::string>& argv, const std::string& matrix_path,
                              const std::string& matrix_text,
                              const std::vector<std::string>& cell_ids, int mpi_size);

/// Prefixes of environment variables that are recorded, exact names, and the markers that
/// drop a name anyway. See Note [Environment allowlist]; tests/unit/common/provenance_test.cc
/// holds the lists, and docs/results-file.md documents them.
extern const std::vector<std::string> kEnvironmentPrefixes;
extern const std::vector<std::string> kEnvironmentNames;
extern const std::vector<std::string> kEnvironmentDenyMarkers;

// Note [Environment allowlist]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Results files are shared, so only variables known to be harmless and to change how a
// benchmark runs are copied into them: exact names (CUDA_VISIBLE_DEVICES, MKL_NUM_THREADS,
// SLURM_JOB_ID, OMPI_COMM_WORLD_SIZE, ...) and four narrow prefixes whose every documented
// variable is a tuning knob (NCCL_, TORCH_NCCL_, OMP_, OMPI_MCA_). Broad prefixes such as
// TORCH_, CUDA_, SLURM_ or PMIX_ are not used: anyone may export TORCH_HUB_TOKEN or a
// personal access token under them, and PMIx puts its server URIs there. Even an allowed
// name is dropped when it contains (case-insensitive) TOKEN, SECRET, PASS, PAT, JWT, KEY,
// CRED, AUTH, PRIVATE, CERT, SIGN, SESSION, COOKIE, TRANSPORT, URI, URL or PRECONDITION:
// SLURM_JWT is an auth token, OMPI_MCA_orte_precondition_transports is Open MPI's per-job
// transport key. The markers are matched as substrings, so a harmless name that contains
// one (NCCL_..._PATH) is dropped too; leaving out a harmless variable is the safe mistake.

/// Whether a variable of this name may be copied into a results file (Note [Environment
/// allowlist]): listed, and without a secret-looking marker.
bool environment_allowed(const std::string& name);

/// Suffixes of the names of variables that hold paths (PYTHONPATH, LD_LIBRARY_PATH,
/// PROJECT_ROOT, HF_HOME, DATA_DIR). See Note [Stored program environment].
extern const std::vector<std::string> kPathVariableSuffixes;

// Note [Stored program environment]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A program experiment's `env` (docs/programs.md) is kept in the stored spec, and the one rule
// below (program_env_value_stored) decides which values: the stored spec (results/) and
// the stored matrix text (Note [Stored matrix text]) both call it. A value is stored when
//  * its name passes the environment allowlist (environment_allowed), or
//  * its name ends in PATH, _ROOT, _HOME or _DIR, the rest of the name carries no secret
//    marker of the allowlist (SSH_KEY_PATH does), and the value is paths only: elements
//    separated by ':', each ".", "..", or holding a '/', or beginning with '~', '$' or '{' (a
//    placeholder such as {output_dir}), made of letters, digits and "_.-+/~${}," alone,
//    without "://" (a URL may carry credentials).
// So PYTHONPATH: "." (what decides which code a program imports, Note [Program code
// identity]) and PROJECT_ROOT: {output_dir} are stored, while a token under any name is not:
// it has no '/' or has characters a path here does not. A bare relative folder (PYTHONPATH:
// src) is not stored either; write ./src. Refused values are stored as "<not stored>".

/// Whether the value of the program `env` entry `name` = `value` may be stored in a results
/// file (Note [Stored program environment]): in the stored spec and in the stored matrix text
/// (Note [Stored matrix text] in matrix/stored_text.h), the one rule for both; a value
/// refused is stored as results::kNotStoredValue. Pure.
bool program_env_value_stored(const std::string& name, const std::string& value);

/// The allowlisted subset of `envp` (a NULL-terminated "NAME=value" array like
/// `environ`). Entries without '=' are ignored.
std::map<std::string, std::string> allowlisted_environment(char** envp);

/// 16 lowercase hex digits: FNV-1a-64 (fnv1a64 of common/cell/cell_spec.h) of the cell ids
/// sorted and joined with '\n'. Independent of the order of `cell_ids`.
std::string matrix_hash(std::vector<std::string> cell_ids);

/// Now as ISO 8601 UTC with milliseconds: "2024-05-01T12:34:56.789Z" (seconds only before
/// layout 1.5: readers accept both).
std::string iso8601_utc_now();

}  // namespace scalebench
