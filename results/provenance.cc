#include "results/provenance.h"

#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "common/base/build_info.h"
#include "common/base/cpu_model.h"
#include "common/cell/cell_spec.h"

namespace scalebench {

// See Note [Environment allowlist]: each entry is a documented tuning knob or job shape.
const std::vector<std::string> kEnvironmentPrefixes = {
    "NCCL_",        // NCCL's own settings (NCCL user guide, "Environment Variables")
    "TORCH_NCCL_",  // ProcessGroupNCCL settings (PyTorch "Environment variables")
    "OMP_",         // OpenMP specification, "Environment Variables"
    "OMPI_MCA_",    // Open MPI MCA parameters
};
const std::vector<std::string> kEnvironmentNames = {
    "HOSTNAME",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_MODULE_LOADING",
    "CUDA_CACHE_DISABLE",
    "PYTORCH_CUDA_ALLOC_CONF",
    "TORCH_DISTRIBUTED_DEBUG",
    "TORCH_CUDNN_V8_API_ENABLED",
    "TORCH_SHOW_CPP_STACKTRACES",
    "MKL_NUM_THREADS",
    "MKL_DYNAMIC",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_THREADING_LAYER",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_NODE_RANK",
    "OMPI_UNIVERSE_SIZE",
    "PMIX_RANK",
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NNODES",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_CPUS_PER_TASK",
    "SLURM_CPUS_ON_NODE",
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_CLUSTER_NAME",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
};
const std::vector<std::string> kEnvironmentDenyMarkers = {
    "TOKEN", "SECRET", "PASS",    "PAT",    "JWT",       "KEY", "CRED", "AUTH",         "PRIVATE",
    "CERT",  "SIGN",   "SESSION", "COOKIE", "TRANSPORT", "URI", "URL",  "PRECONDITION",
};

namespace {

bool looks_secret(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return std::any_of(
      kEnvironmentDenyMarkers.begin(), kEnvironmentDenyMarkers.end(),
      [&](const std::string& marker) { return name.find(marker) != std::string::npos; });
}

}  // namespace

bool environment_allowed(const std::string& name) {
  const bool listed =
      std::find(kEnvironmentNames.begin(), kEnvironmentNames.end(), name) !=
          kEnvironmentNames.end() ||
      std::any_of(kEnvironmentPrefixes.begin(), kEnvironmentPrefixes.end(),
                  [&](const std::string& prefix) { return name.rfind(prefix, 0) == 0; });
  return listed && !looks_secret(name);
}

const std::vector<std::string> kPathVariableSuffixes = {"PATH", "_ROOT", "_HOME", "_DIR"};

namespace {

/// Note [Stored program environment]: one element of a path list.
bool path_element(const std::string& element) {
  if (element.empty()) return true;  // "a::b" or a trailing ':' (the current directory)
  const bool shaped = element == "." || element == ".." || element.find('/') != std::string::npos ||
                      element.front() == '~' || element.front() == '$' || element.front() == '{';
  return shaped && std::all_of(element.begin(), element.end(), [](unsigned char c) {
           return std::isalnum(c) != 0 ||
                  std::string_view("_.-+/~${},").find(static_cast<char>(c)) !=
                      std::string_view::npos;
         });
}

}  // namespace

bool program_env_value_stored(const std::string& name, const std::string& value) {
  if (environment_allowed(name)) return true;
  const auto suffix = std::find_if(
      kPathVariableSuffixes.begin(), kPathVariableSuffixes.end(), [&](const std::string& s) {
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
      });
  if (suffix == kPathVariableSuffixes.end()) return false;
  if (looks_secret(name.substr(0, name.size() - suffix->size()))) return false;
  if (value.empty() || value.find("://") != std::string::npos) return false;
  size_t start = 0;
  while (true) {
    const size_t colon = value.find(':', start);
    if (!path_element(value.substr(start, colon - start))) return false;
    if (colon == std::string::npos) return true;
    start = colon + 1;
  }
}

namespace {

std::string mpi_thread_level_name() {
  int initialized = 0;
  if (MPI_Initialized(&initialized) != MPI_SUCCESS || initialized == 0) return "";
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Query_thread(&provided) != MPI_SUCCESS) return "";
  switch (provided) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "MPI_THREAD_MULTIPLE";
  }
}

std::string mpi_library_version() {
  std::array<char, MPI_MAX_LIBRARY_VERSION_STRING> buffer{};
  int length = 0;
  if (MPI_Get_library_version(buffer.data(), &length) != MPI_SUCCESS) return "";
  std::string text(buffer.data(), static_cast<size_t>(std::max(0, length)));
  text = text.substr(0, text.find('\n'));
  while (!text.empty() &&
         (text.back() == ',' || std::isspace(static_cast<unsigned char>(text.back())))) {
    text.pop_back();
  }
  return text;
}

std::string hdf5_library_version() {
  unsigned major = 0;
  unsigned minor = 0;
  unsigned release = 0;
  if (H5get_libversion(&major, &minor, &release) < 0) return "";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

}  // namespace

std::map<std::string, std::string> allowlisted_environment(char** envp) {
  std::map<std::string, std::string> out;
  for (char** entry = envp; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const size_t equals = text.find('=');
    if (equals == std::string::npos || equals == 0) continue;
    std::string name = text.substr(0, equals);
    if (environment_allowed(name)) out[std::move(name)] = text.substr(equals + 1);
  }
  return out;
}

std::string matrix_hash(std::vector<std::string> cell_ids) {
  std::sort(cell_ids.begin(), cell_ids.end());
  std::string joined;
  for (size_t i = 0; i < cell_ids.size(); ++i) {
    if (i > 0) joined += '\n';
    joined += cell_ids[i];
  }
  std::array<char, 17> hex{};
  std::snprintf(hex.data(), hex.size(), "%016llx",
                static_cast<unsigned long long>(fnv1a64(joined)));
  return hex.data();
}

std::string iso8601_utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  std::array<char, 32> buffer{};
  const size_t length = std::strftime(buffer.data(), buffer.size(), "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(buffer.data() + length, buffer.size() - length, ".%03dZ", static_cast<int>(millis));
  return buffer.data();
}

Provenance collect_provenance(const std::vector<std::string>& argv, const std::string& matrix_path,
                              const std::string& matrix_text,
                              const std::vector<std::string>& cell_ids, int mpi_size) {
  Provenance p;
  p.tool_version = build_info::kVersion;
  p.tool_commit = build_info::kGitCommit;
  p.tool_dirty = build_info::kGitDirty;
  p.build_type = build_info::kBuildType;
  p.mpi_version = mpi_library_version();
  p.mpi_thread_level = mpi_thread_level_name();
  p.hdf5_version = hdf5_library_version();
  p.mpi_size = mpi_size;
  p.argv = argv;
  p.matrix_path = matrix_path;
  p.matrix_text = matrix_text;
  p.matrix_hash = matrix_hash(cell_ids);
  p.cell_count = static_cast<int64_t>(cell_ids.size());
  p.environment = allowlisted_environment(environ);
  p.start_time = iso8601_utc_now();
  return p;
}

}  // namespace scalebench
