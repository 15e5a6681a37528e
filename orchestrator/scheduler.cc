#include "orchestrator/scheduler.h"

#include <algorithm>
#include <map>
#include <utility>

#include "matrix/branch_resolution.h"

namespace scalebench {

std::string to_string(SchedulingMode mode) {
  return mode == SchedulingMode::kPacked ? "packed" : "exclusive";
}

std::optional<SchedulingMode> parse_scheduling_mode(const std::string& text) {
  if (text == "exclusive") return SchedulingMode::kExclusive;
  if (text == "packed") return SchedulingMode::kPacked;
  return std::nullopt;
}

std::filesystem::path RunOptions::effective_log_dir() const {
  if (!log_dir.empty()) return log_dir;
  return std::filesystem::path(output_path.string() + ".logs");
}

std::filesystem::path RunOptions::effective_work_dir() const {
  return work_dir.empty() ? default_work_dir(output_path) : work_dir;
}

std::optional<std::string> unschedulable_reason(int world_size, int worker_count) {
  if (world_size < 1) {
    return "world_size " + std::to_string(world_size) + " is not a positive number of workers";
  }
  if (world_size > worker_count) {
    return "needs " + std::to_string(world_size) + " workers but the job has " +
           std::to_string(worker_count) + " (mpirun -np " + std::to_string(world_size + 1) +
           " or more runs it)";
  }
  return std::nullopt;
}

namespace {

/// Free workers per host, hosts in order of first appearance, workers by local index.
std::vector<std::vector<WorkerSlot>> by_host(const std::vector<WorkerSlot>& workers) {
  std::vector<std::vector<WorkerSlot>> nodes;
  std::map<std::string, size_t> index_of_host;
  for (const auto& worker : workers) {
    auto [it, inserted] = index_of_host.try_emplace(worker.host, nodes.size());
    if (inserted) nodes.emplace_back();
    nodes[it->second].push_back(worker);
  }
  for (auto& node : nodes) {
    std::stable_sort(node.begin(), node.end(), [](const WorkerSlot& a, const WorkerSlot& b) {
      return a.local_index != b.local_index ? a.local_index < b.local_index
                                            : a.world_rank < b.world_rank;
    });
  }
  return nodes;
}

}  // namespace

std::optional<std::vector<int>> choose_group(const std::vector<WorkerSlot>& free_workers,
                                             int world_size) {
  if (world_size < 1 || static_cast<size_t>(world_size) > free_workers.size()) return std::nullopt;
  const auto nodes = by_host(free_workers);
  const auto wanted = static_cast<size_t>(world_size);
  std::vector<int> members;

  // Best fit on one node: the node with the fewest free workers that still has enough.
  const std::vector<WorkerSlot>* best = nullptr;
  for (const auto& node : nodes) {
    if (node.size() >= wanted && (best == nullptr || node.size() < best->size())) best = &node;
  }
  if (best != nullptr) {
    for (size_t i = 0; i < wanted; ++i) members.push_back((*best)[i].world_rank);
    return members;
  }

  // Span the fewest nodes: largest free sets first (stable: ties keep host order).
  std::vector<const std::vector<WorkerSlot>*> order;
  order.reserve(nodes.size());
  for (const auto& node : nodes) order.push_back(&node);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto* a, const auto* b) { return a->size() > b->size(); });
  for (const auto* node : order) {
    for (const auto& worker : *node) {
      if (members.size() == wanted) return members;
      members.push_back(worker.world_rank);
    }
  }
  return members;
}

std::vector<Dispatch> plan_dispatches(const std::vector<PendingCell>& pending,
                                      const std::vector<WorkerSlot>& free_workers,
                                      size_t running_cells, SchedulingMode mode) {
  std::vector<Dispatch> dispatches;
  if (pending.empty()) return dispatches;
  if (mode == SchedulingMode::kExclusive) {
    if (running_cells > 0) return dispatches;
    if (auto members = choose_group(free_workers, pending.front().world_size)) {
      dispatches.push_back({pending.front().index, std::move(*members)});
    }
    return dispatches;
  }
  std::vector<WorkerSlot> free = free_workers;
  for (const auto& cell : pending) {
    auto members = choose_group(free, cell.world_size);
    if (!members) continue;
    std::erase_if(free, [&](const WorkerSlot& worker) {
      return std::find(members->begin(), members->end(), worker.world_rank) != members->end();
    });
    dispatches.push_back({cell.index, std::move(*members)});
    if (free.empty()) break;
  }
  return dispatches;
}

Scheduler::Scheduler(std::vector<WorkerSlot> workers, std::vector<PendingCell> pending,
                     SchedulingMode mode)
    : workers_(std::move(workers)), pending_(pending.begin(), pending.end()), mode_(mode) {
  for (const auto& worker : workers_) free_.insert(worker.world_rank);
}

std::vector<Dispatch> Scheduler::take_dispatches() {
  std::vector<WorkerSlot> free_workers;
  for (const auto& worker : workers_) {
    if (free_.contains(worker.world_rank)) free_workers.push_back(worker);
  }
  const std::vector<PendingCell> queue(pending_.begin(), pending_.end());
  auto dispatches = plan_dispatches(queue, free_workers, running_, mode_);
  for (const auto& dispatch : dispatches) {
    for (const int rank : dispatch.members) free_.erase(rank);
    std::erase_if(pending_, [&](const PendingCell& cell) { return cell.index == dispatch.index; });
    ++running_;
  }
  return dispatches;
}

void Scheduler::release(const std::vector<int>& members) {
  for (const int rank : members) free_.insert(rank);
  if (running_ > 0) --running_;
}

void Scheduler::add_pending(const std::vector<PendingCell>& cells) {
  pending_.insert(pending_.end(), cells.begin(), cells.end());
}

std::vector<PendingCell> Scheduler::drop_pending() {
  std::vector<PendingCell> dropped(pending_.begin(), pending_.end());
  pending_.clear();
  return dropped;
}

}  // namespace scalebench
