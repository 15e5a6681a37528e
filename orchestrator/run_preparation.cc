#include "orchestrator/run_preparation.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "common/base/escaped_text.h"
#include "common/base/logging.h"
#include "matrix/stored_text.h"
#include "orchestrator/cell_inputs.h"
#include "orchestrator/dispatch_order.h"
#include "orchestrator/orchestrator.h"
#include "program/preflight/program_preflight.h"
#include "protocol/mpi_comm.h"
#include "results/cells.h"
#include "results/provenance.h"

namespace scalebench {
namespace {

nlohmann::json devices_json(const std::vector<WorkerHello>& hellos) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& h : hellos) {
    devices.push_back({{"rank", h.world_rank},
                       {"host", h.host},
                       {"device", h.device},
                       {"cpu", h.cpu_model},
                       {"cores", h.node_cores}});
  }
  return devices;
}

Provenance make_provenance(const RunOptions& options, const ResolvedMatrix& matrix,
                           const std::vector<WorkerHello>& hellos, const WorkerFactory& worker) {
  // Note [Stored matrix text]: program env values the spec does not store, the text does not.
  const std::string text = stored_matrix_text(matrix.matrix().text, matrix.matrix().format,
                                              program_env_value_stored, results::kNotStoredValue);
  Provenance provenance = collect_provenance(options.argv, options.matrix_path.string(), text,
                                             matrix.cell_ids(), world_size());
  provenance.matrix_warnings = matrix.warnings();
  if (worker.library_versions) {
    const auto versions = worker.library_versions();
    auto get = [&](const char* key) {
      const auto it = versions.find(key);
      return it == versions.end() ? std::string() : it->second;
    };
    provenance.torch_version = get("torch");
    provenance.cuda_version = get("cuda");
    provenance.nccl_version = get("nccl");
  }
  std::set<std::string> hosts{hostname()};
  for (const auto& h : hellos) hosts.insert(h.host);
  provenance.hosts.assign(hosts.begin(), hosts.end());
  provenance.devices = devices_json(hellos).dump();
  return provenance;
}

/// Note [Program preflight]: each distinct configuration of `to_run`'s program cells checked
/// once; throws PreflightError when one fails.
void preflight(const RunOptions& options, const ResolvedMatrix& matrix,
               const std::vector<CellSpec>& to_run) {
  std::map<std::string, std::filesystem::path> worktrees;
  for (const auto& [ref, branch] : matrix.branches()) worktrees.emplace(ref, branch.worktree);
  const CellInputs trees(std::filesystem::absolute(options.matrix_path).parent_path(),
                         std::move(worktrees));
  const char* path = std::getenv("PATH");
  const PreflightContext context{
      .tree_of = [&trees](const CellSpec& cell) { return trees.tree_of(cell); },
      .scratch_dir = options.effective_work_dir() / "preflight",
      .caller_path = path ? path : ""};
  const std::string summary = preflight_program_cells(
      to_run, context, options.effective_log_dir() / "preflight.log",
      "to run without the check, pass --no-preflight or set preflight: none in the program",
      [](const std::string& line) { SB_LOG(info) << line; });
  if (!summary.empty()) SB_LOG(info) << summary;
}

}  // namespace

void check_run_paths(const RunOptions& options, int ranks) {
  check_log_dir(options.effective_log_dir(), ranks);
  const auto& output = options.output_path;
  if (std::filesystem::is_directory(output)) {
    throw InputError("-o " + escaped(output) +
                     " is a directory; pass the path of the results file (e.g. " +
                     escaped(output / "results.h5") + ")");
  }
  std::error_code error;
  if (std::filesystem::equivalent(output, options.matrix_path, error)) {
    throw InputError("-o " + escaped(output) + " is the matrix file " +
                     escaped(options.matrix_path) +
                     " itself; pass another -o path (--force never replaces the matrix)");
  }
}

PreparedRun prepare_run(const RunOptions& options, const std::vector<WorkerHello>& hellos,
                        const WorkerFactory& worker) {
  check_run_paths(options, world_size());
  PreparedRun prepared;
  prepared.lock.emplace(ResultsLock::acquire(options.output_path));
  prepared.matrix.emplace(resolve_matrix(options.matrix_path,
                                         {.limits = {}, .work_dir = options.effective_work_dir()}));
  const ResolvedMatrix& matrix = *prepared.matrix;
  for (const auto& warning : matrix.warnings()) SB_LOG(warning) << warning;
  const auto matrix_mode = parse_scheduling_mode(matrix.matrix().scheduling);
  prepared.scheduling =
      options.scheduling.value_or(matrix_mode.value_or(SchedulingMode::kExclusive));
  const auto& cells = matrix.cells();
  const bool resuming = options.resume && std::filesystem::exists(options.output_path);
  if (resuming) {
    prepared.store.emplace(
        ResultsStore::open_for_resume(options.output_path, matrix_hash(matrix.cell_ids())));
    const auto stored = prepared.store->cells();
    for (const auto& cell : cells) {
      const auto it = stored.find(cell.cell_id);
      const auto status = it == stored.end() ? std::nullopt : std::optional(it->second.status);
      if (should_run_on_resume(status, options.retry_failed)) {
        prepared.to_run.push_back(cell);
      } else {
        ++prepared.already_done;
      }
    }
    SB_LOG(info) << "resuming " << escaped(options.output_path) << ": " << prepared.already_done
                 << " of " << cells.size() << " cells already final, " << prepared.to_run.size()
                 << " to run";
  } else {
    prepared.to_run = cells;
  }
  // Note [Program preflight]: before the results file is created, so a failed check leaves
  // nothing behind.
  if (options.preflight) preflight(options, matrix, prepared.to_run);
  if (!resuming) {
    const Provenance provenance = make_provenance(options, matrix, hellos, worker);
    prepared.store.emplace(ResultsStore::create(options.output_path, provenance, options.force));
  }
  std::map<std::string, CommitInfo> commit_info;
  for (const auto& [ref, branch] : matrix.branches()) {
    commit_info[branch.commit] = {branch.commit_date_iso, branch.dirty};
    SB_LOG(info) << "branch " << ref << " = " << branch.commit << " (" << branch.commit_date_iso
                 << (branch.dirty ? ", repo checkout dirty" : "") << ") in "
                 << branch.worktree.string();
  }
  prepared.store->set_commit_info(std::move(commit_info));
  // Note [Repetitions]: interleaved repetitions run in seeded rounds; resume keeps the
  // order of the cells still to run.
  const uint64_t order_seed =
      options.order_seed.value_or(default_order_seed(matrix_hash(matrix.cell_ids())));
  if (std::any_of(prepared.to_run.begin(), prepared.to_run.end(), is_interleaved)) {
    prepared.to_run = dispatch_order(std::move(prepared.to_run), order_seed);
    prepared.store->set_order_seed(order_seed);
    SB_LOG(info) << "repetitions interleaved in a shuffled order (--order-seed " << order_seed
                 << ")";
  }
  return prepared;
}

}  // namespace scalebench
