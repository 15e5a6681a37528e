#include "results/store.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <system_error>
#include <utility>

#include "common/base/escaped_text.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "results/cells.h"
#include "results/durable_file.h"
#include "results/profile_table.h"
#include "results/reader.h"

namespace scalebench {

/// The temporary copy that the current batch's mutations go to.
struct ResultsStore::PendingUpdate {
  hid_t file = H5I_INVALID_HID;  ///< not owned: commit_single_update's copy, open during body
};

namespace {

Hdf5Handle file_access_plist() {
  Hdf5Handle access = own_plist(HDF5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
  // Close every object of the file with it, so H5Fclose really writes and closes.
  HDF5_CHECK(H5Pset_fclose_degree(access, H5F_CLOSE_STRONG));
  HDF5_CHECK(H5Pset_libver_bounds(access, H5F_LIBVER_V110, H5F_LIBVER_V110));
  return access;
}

Hdf5Handle file_create_plist() {
  Hdf5Handle creation = own_plist(HDF5_CHECK(H5Pcreate(H5P_FILE_CREATE)));
  HDF5_CHECK(H5Pset_attr_phase_change(creation, h5::kMaxCompactAttributes,
                                      h5::kMaxCompactAttributes - 16));
  // Track free space across sessions, so that the space of replaced attributes and
  // dropped datasets (every update is its own session) is reused, not leaked.
  HDF5_CHECK(H5Pset_file_space_strategy(creation, H5F_FSPACE_STRATEGY_FSM_AGGR, 1, 1));
  return creation;
}

Hdf5Handle open_file(const std::filesystem::path& path, unsigned flags) {
  const Hdf5Handle access = file_access_plist();
  return own_file(HDF5_CHECK(H5Fopen(path.c_str(), flags, access)));
}

std::string json_list(const std::vector<std::string>& values) {
  return nlohmann::json(values).dump();
}

void write_provenance(hid_t file, const Provenance& p) {
  using h5::write_string_attribute;
  write_string_attribute(file, "scalebench_layout_version", kResultsLayoutVersion);
  write_string_attribute(file, "tool_version", p.tool_version);
  write_string_attribute(file, "tool_commit", p.tool_commit);
  h5::write_flag_attribute(file, "tool_dirty", p.tool_dirty);
  write_string_attribute(file, "build_type", p.build_type);
  write_string_attribute(file, "torch_version", p.torch_version);
  write_string_attribute(file, "cuda_version", p.cuda_version);
  write_string_attribute(file, "nccl_version", p.nccl_version);
  write_string_attribute(file, "mpi_version", p.mpi_version);
  write_string_attribute(file, "mpi_thread_level", p.mpi_thread_level);
  write_string_attribute(file, "hdf5_version", p.hdf5_version);
  write_string_attribute(file, "hosts", json_list(p.hosts));
  write_string_attribute(file, "devices", p.devices);
  h5::write_int64_attribute(file, "mpi_size", p.mpi_size);
  write_string_attribute(file, "argv", json_list(p.argv));
  write_string_attribute(file, "matrix_path", p.matrix_path);
  write_string_attribute(file, "matrix_text", p.matrix_text);
  write_string_attribute(file, "matrix_warnings", nlohmann::json(p.matrix_warnings).dump());
  write_string_attribute(file, "matrix_hash", p.matrix_hash);
  h5::write_int64_attribute(file, "cell_count", p.cell_count);
  write_string_attribute(file, "environment", nlohmann::json(p.environment).dump());
  write_string_attribute(file, "start_time", p.start_time);
  write_string_attribute(file, "end_time", "");
  h5::write_int64_attribute(file, "run_count", 1);
}

/// InputError unless `path` is an existing HDF5 file.
void require_hdf5_file(const std::filesystem::path& path, const std::string& what_to_do) {
  if (!std::filesystem::exists(path)) {
    throw InputError("results file " + path.string() + " does not exist; " + what_to_do);
  }
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw InputError("results file " + path.string() +
                     " is not an HDF5 file; pass the .h5 file a scalebench run wrote");
  }
}

/// InputError unless the file's layout major version is kResultsLayoutMajor.
void require_layout_major(hid_t file, const std::filesystem::path& path) {
  if (HDF5_CHECK(H5Aexists(file, "scalebench_layout_version")) == 0) {
    throw InputError("results file " + path.string() +
                     " is not a scalebench results file (no root attribute "
                     "scalebench_layout_version)");
  }
  const std::string version = h5::read_string_attribute(file, "scalebench_layout_version");
  const std::string major = version.substr(0, version.find('.'));
  if (major != std::to_string(kResultsLayoutMajor)) {
    throw InputError("results file " + path.string() + " has layout version " + version +
                     " which this scalebench cannot read: required " +
                     std::to_string(kResultsLayoutMajor) + ", found " + major +
                     "; use the scalebench version that wrote it, or start a new file");
  }
}

void require_matrix_hash(hid_t file, const std::filesystem::path& path,
                         const std::string& expected) {
  const std::string found = h5::read_string_attribute(file, "matrix_hash");
  if (found != expected) {
    throw InputError("cannot resume " + path.string() + ": it was written for another matrix " +
                     "(matrix_hash " + found + ", the given matrix gives " + expected +
                     "): cells were added, removed or changed since. Resume with the original "
                     "matrix, or start a new results file (another -o path, or --force to "
                     "overwrite this one)");
  }
}

// Note [Disk full]
// An update that fails because the file system is full (ENOSPC), a quota is exceeded
// (EDQUOT) or the file size limit is reached (EFBIG) loses nothing: the temporary is
// removed and the results file is the previous, complete version (Note [Results
// durability]). The error the user sees is one line naming the file, the free space and
// what was kept, not the HDF5 error stack (HDF5 reports the OS error inside it).
bool is_no_space(const std::string& text) {
  for (const char* marker : {"No space left on device", "Disk quota exceeded", "File too large",
                             "errno = 28,", "errno = 122,", "errno = 27,"}) {
    if (text.find(marker) != std::string::npos) return true;
  }
  return false;
}

std::string mebibytes(std::uintmax_t bytes) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return out.str();
}

[[noreturn]] void throw_no_space(const std::filesystem::path& path, const std::string& cause) {
  std::error_code error;
  const auto directory = std::filesystem::absolute(path, error).parent_path();
  const auto space = std::filesystem::space(directory, error);
  const std::string free_text = error ? "free space unknown" : mebibytes(space.available) + " free";
  std::error_code size_error;
  const auto size = std::filesystem::file_size(path, size_error);
  const std::string reason = cause.find("File too large") != std::string::npos ||
                                     cause.find("errno = 27,") != std::string::npos
                                 ? "the file size limit (ulimit -f) was reached"
                                 : "its file system is full or over quota";
  throw NoSpaceError("cannot update results file " + escaped(path) + ": " + reason + " (" +
                     free_text + " in " + escaped(directory) +
                     (size_error ? "" : ", the file is " + mebibytes(size)) +
                     "). The update was discarded; the file is unchanged and holds every cell "
                     "finished before it. Free space (or use -o on another file system) and "
                     "run the same command with --resume");
}

/// Inside a catch block: removes the update's temporary copy `temp` and rethrows the
/// exception in flight, a full disk as NoSpaceError about `path` (Note [Disk full]).
[[noreturn]] void discard_update_and_rethrow(const std::filesystem::path& temp,
                                             const std::filesystem::path& path) {
  std::error_code ignored;
  std::filesystem::remove(temp, ignored);
  try {
    throw;
  } catch (const Error& e) {
    if (is_no_space(e.what())) throw_no_space(path, e.what());
    throw;
  }
}

/// Runs the mutation protocol of Note [Results durability] around `change`.
/// Writes a complete new version of `path` into a temporary sibling with `write(temp)`, then
/// renames it over `path` (see Note [Results durability]); on any failure the temporary is
/// removed and `path` is untouched.
void replace_atomically(const std::filesystem::path& path,
                        const std::function<void(const std::filesystem::path&)>& write) {
  const auto temp = durable::temp_sibling(path);
  try {
    durable::create_temp_like(path, temp);  // the file keeps its mode and group
    write(temp);
    durable::commit_replace(temp, path);
  } catch (...) {
    discard_update_and_rethrow(temp, path);
  }
}

void commit_single_update(const std::filesystem::path& path,
                          const std::function<void(hid_t)>& change) {
  replace_atomically(path, [&](const std::filesystem::path& temp) {
    durable::copy_contents(path, temp);
    Hdf5Handle file = open_file(temp, H5F_ACC_RDWR);
    change(file);
    file.close();
  });
}

}  // namespace

ResultsStore::ResultsStore(std::filesystem::path path) : path_(std::move(path)) {}
ResultsStore::ResultsStore(ResultsStore&&) noexcept = default;
ResultsStore& ResultsStore::operator=(ResultsStore&&) noexcept = default;
ResultsStore::~ResultsStore() = default;

ResultsStore ResultsStore::create(const std::filesystem::path& path, const Provenance& provenance,
                                  bool force) {
  silence_hdf5_error_printing();
  if (std::filesystem::is_directory(path)) {
    throw InputError("results file " + escaped(path) +
                     " is a directory; pass the path of a file (e.g. " +
                     escaped(path / "results.h5") + ")");
  }
  if (std::filesystem::exists(path) && !force) {
    throw InputError("results file " + escaped(path) +
                     " exists; pass --force to overwrite or --resume to continue");
  }
  if (!path.parent_path().empty()) std::filesystem::create_directories(path.parent_path());
  durable::remove_stale_temps(path);
  replace_atomically(path, [&](const std::filesystem::path& temp) {
    const Hdf5Handle access = file_access_plist();
    const Hdf5Handle creation = file_create_plist();
    Hdf5Handle file =
        own_file(HDF5_CHECK(H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, creation, access)));
    write_provenance(file, provenance);
    h5::create_group(file, results::kCellsGroup);
    file.close();
  });
  return ResultsStore(path);
}

ResultsStore ResultsStore::open_for_resume(const std::filesystem::path& path,
                                           const std::string& expected_matrix_hash) {
  silence_hdf5_error_printing();
  require_hdf5_file(path, "run without --resume to start a new one");
  // Never write to a file that cannot be read whole (Note [Reading damaged files]).
  const nlohmann::json overview = read_results_overview(path);
  if (const std::string damage = describe_damage(overview); !damage.empty()) {
    throw InputError("cannot resume " + path.string() + ": it is damaged (" + damage +
                     "); nothing was written to it. Use a backup copy, or start a new results "
                     "file (another -o path, or --force to overwrite this one)");
  }
  {
    const Hdf5Handle file = open_file(path, H5F_ACC_RDONLY);
    require_layout_major(file, path);
    require_matrix_hash(file, path, expected_matrix_hash);
  }
  durable::remove_stale_temps(path);
  ResultsStore store(path);
  store.mutate([](hid_t file) {
    h5::write_int64_attribute(file, "run_count", h5::read_int64_attribute(file, "run_count") + 1);
    h5::write_string_attribute(file, "end_time", "");
  });
  return store;
}

void ResultsStore::mutate(const std::function<void(hid_t)>& change) {
  silence_hdf5_error_printing();
  if (pending_) {
    change(pending_->file);
  } else {
    commit_single_update(path_, change);
  }
}

void ResultsStore::batch(const std::function<void()>& body) {
  if (pending_) {
    body();
    return;
  }
  silence_hdf5_error_printing();
  // The batch is one commit_single_update: its mutations go to that update's open copy
  // (pending_->file), closed before the rename or the removal of the temporary.
  pending_ = std::make_unique<PendingUpdate>();
  struct EndBatch {
    std::unique_ptr<PendingUpdate>& pending;
    ~EndBatch() { pending.reset(); }
  } end_batch{pending_};
  commit_single_update(path_, [&](hid_t file) {
    pending_->file = file;
    body();
  });
}

std::map<std::string, StoredCell> ResultsStore::cells() const {
  silence_hdf5_error_printing();
  const Hdf5Handle file = open_file(path_, H5F_ACC_RDONLY);
  const Hdf5Handle group = own_group(HDF5_CHECK(H5Gopen2(file, results::kCellsGroup, H5P_DEFAULT)));
  std::map<std::string, StoredCell> out;
  for (const auto& id : h5::link_names(group)) {
    const Hdf5Handle cell = own_group(HDF5_CHECK(H5Gopen2(group, id.c_str(), H5P_DEFAULT)));
    StoredCell stored;
    stored.cell_id = id;
    const std::string status = h5::read_string_attribute(cell, "status");
    const auto parsed = parse_cell_status(status);
    if (!parsed) {
      throw InputError("results file " + path_.string() + ": cell " + id + " has unknown status '" +
                       status + "'");
    }
    stored.status = *parsed;
    stored.reason = h5::read_string_attribute(cell, "reason");
    stored.failed_phase = h5::read_string_attribute(cell, "failed_phase");
    stored.spec_json = h5::read_string_attribute(cell, "spec");
    out.emplace(id, std::move(stored));
  }
  return out;
}

void ResultsStore::mark_running(const CellSpec& cell, const std::vector<int>& ranks,
                                const std::string& at) {
  mutate([&](hid_t file) {
    const Hdf5Handle group = open_cell(file, cell);
    results::drop_results(group);
    results::write_status(group, CellStatus::kRunning, FailurePhase::kNone, "");
    h5::write_string_attribute(group, "started_at", at);
    h5::write_string_attribute(group, "finished_at", "");
    h5::write_string_attribute(group, "ranks", nlohmann::json(ranks).dump());
  });
}

void ResultsStore::mark_skipped(const CellSpec& cell, const std::string& reason,
                                const std::string& at) {
  mutate([&](hid_t file) {
    const Hdf5Handle group = open_cell(file, cell);
    results::drop_results(group);
    results::write_status(group, CellStatus::kSkipped, FailurePhase::kNone, reason);
    h5::write_string_attribute(group, "started_at", "");
    h5::write_string_attribute(group, "finished_at", at);
    h5::write_string_attribute(group, "ranks", "[]");
  });
}

void ResultsStore::complete_cell(const CellSpec& cell, const std::vector<RankResult>& ranks,
                                 const std::string& at) {
  if (ranks.empty()) {
    throw Error("complete_cell(" + cell.cell_id +
                "): no rank results; use "
                "finish_cell_without_results for a cell without results");
  }
  const CellSummary summary = summarize_cell(cell, ranks);
  const CellOutcome outcome = cell_outcome(ranks);
  std::vector<int> world_ranks;
  world_ranks.reserve(ranks.size());
  for (const auto& r : ranks) world_ranks.push_back(r.world_rank);
  mutate([&](hid_t file) {
    const Hdf5Handle group = open_cell(file, cell);
    results::drop_results(group);
    results::write_rank_datasets(group, cell, ranks);
    results::write_effective(group, ranks);
    results::write_summary(group, summary);
    results::write_accuracy(group, ranks);
    results::write_validation_outputs(group, ranks);
    results::write_probes(group, ranks);
    results::write_profile(group, ranks);  // Note [Operator profiles]
    results::write_status(group, outcome.status, outcome.failed_phase, outcome.reason);
    results::write_string_if_absent(group, "started_at", "");
    h5::write_string_attribute(group, "finished_at", at);
    h5::write_string_attribute(group, "ranks", nlohmann::json(world_ranks).dump());
  });
}

void ResultsStore::finish_cell_without_results(const CellSpec& cell, CellStatus status,
                                               FailurePhase phase, const std::string& reason,
                                               const std::string& at) {
  mutate([&](hid_t file) {
    const Hdf5Handle group = open_cell(file, cell);
    results::drop_results(group);
    results::write_status(group, status, phase, reason);
    results::write_string_if_absent(group, "started_at", "");
    results::write_string_if_absent(group, "ranks", "[]");
    h5::write_string_attribute(group, "finished_at", at);
  });
}

void ResultsStore::set_commit_info(std::map<std::string, CommitInfo> commit_info) {
  commit_info_ = std::move(commit_info);
}

results::StoredValidation ResultsStore::validation(const std::string& cell_id) const {
  silence_hdf5_error_printing();
  const Hdf5Handle file = open_file(path_, H5F_ACC_RDONLY);
  const Hdf5Handle cells = own_group(HDF5_CHECK(H5Gopen2(file, results::kCellsGroup, H5P_DEFAULT)));
  if (!h5::has_link(cells, cell_id)) return {};
  const Hdf5Handle cell = own_group(HDF5_CHECK(H5Gopen2(cells, cell_id.c_str(), H5P_DEFAULT)));
  return results::read_validation(cell);
}

void ResultsStore::record_cross_cell_accuracy(const CellSpec& cell, const AccuracyReport& report,
                                              const std::string& reference_cell) {
  mutate([&](hid_t file) {
    const Hdf5Handle group = open_cell(file, cell);
    results::write_accuracy_report(group, report, reference_cell);
    h5::write_string_attribute(group, std::string(results::kEffectivePrefix) + "validate", "true");
  });
}

void ResultsStore::record_not_compared(const CellSpec& cell, const std::string& reason) {
  mutate([&](hid_t file) {
    const Hdf5Handle group = open_cell(file, cell);
    h5::delete_link_if_present(group, "accuracy");
    h5::write_string_attribute(group, std::string(results::kEffectivePrefix) + "validate", "false");
    const auto names = h5::attribute_names(group);
    auto reasons =
        std::find(names.begin(), names.end(), results::kIneffectiveReasons) == names.end()
            ? nlohmann::json::array()
            : nlohmann::json::parse(h5::read_string_attribute(group, results::kIneffectiveReasons));
    if (std::find(reasons.begin(), reasons.end(), reason) == reasons.end())
      reasons.push_back(reason);
    h5::write_string_attribute(group, results::kIneffectiveReasons, reasons.dump());
  });
}

Hdf5Handle ResultsStore::open_cell(hid_t file, const CellSpec& cell) const {
  const auto it = commit_info_.find(cell.commit);
  const CommitInfo info = it == commit_info_.end() ? CommitInfo{} : it->second;
  return results::open_or_create_cell(file, cell, info.date_iso, info.dirty);
}

void ResultsStore::record_progress(const CellSpec& cell, const CellProgress& progress,
                                   const std::string& at) {
  mutate([&](hid_t file) { results::write_progress(open_cell(file, cell), progress, at); });
}

void ResultsStore::write_series(const std::vector<SeriesSummary>& series) {
  if (series.empty()) return;
  mutate([&](hid_t file) { results::write_series(file, series); });
}

void ResultsStore::set_order_seed(uint64_t seed) {
  mutate([&](hid_t file) { h5::write_string_attribute(file, "order_seed", std::to_string(seed)); });
}

void ResultsStore::set_commit_log(const std::string& commit_log_json) {
  mutate([&](hid_t file) { h5::write_string_attribute(file, "commit_log", commit_log_json); });
}

void ResultsStore::set_end_time(const std::string& iso_time) {
  mutate([&](hid_t file) { h5::write_string_attribute(file, "end_time", iso_time); });
}

}  // namespace scalebench
