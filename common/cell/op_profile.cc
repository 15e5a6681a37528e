#include "common/cell/op_profile.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace scalebench {
namespace {

using Kind = ProfiledEvent::Kind;

constexpr double kNsPerS = 1e9;

int64_t duration_ns(const ProfiledEvent& event) {
  return std::max<int64_t>(0, event.end_ns - event.start_ns);
}

/// The phase scopes, and the innermost one holding a moment.
class Phases {
 public:
  explicit Phases(const std::vector<ProfiledEvent>& events) {
    for (const auto& event : events) {
      if (event.kind == Kind::kPhase) scopes_.push_back(&event);
    }
  }
  /// The innermost scope with start <= t < end (the latest start; of equal starts the
  /// shortest); "" when none holds t.
  [[nodiscard]] std::string at(int64_t t) const {
    const ProfiledEvent* best = nullptr;
    for (const ProfiledEvent* scope : scopes_) {
      if (scope->start_ns > t || t >= scope->end_ns) continue;
      if (best == nullptr || scope->start_ns > best->start_ns ||
          (scope->start_ns == best->start_ns && scope->end_ns < best->end_ns)) {
        best = scope;
      }
    }
    return best == nullptr ? std::string() : best->name;
  }

 private:
  std::vector<const ProfiledEvent*> scopes_;
};

/// Self time and self memory of each kOp (indexed like `events`), from the nesting on
/// each thread: a stack of the ops open at each event's start.
void nest(const std::vector<ProfiledEvent>& events, std::vector<int64_t>& child_ns,
          std::vector<int64_t>& memory) {
  std::map<uint64_t, std::vector<size_t>> by_thread;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == Kind::kOp || events[i].kind == Kind::kMemory) {
      by_thread[events[i].thread].push_back(i);
    }
  }
  for (auto& [thread, indices] : by_thread) {
    // Start ascending; at one start an op before a memory event, a longer op before a
    // shorter one (the enclosing one first).
    std::sort(indices.begin(), indices.end(), [&](size_t a, size_t b) {
      const auto& x = events[a];
      const auto& y = events[b];
      return std::make_tuple(x.start_ns, x.kind == Kind::kMemory, -x.end_ns, a) <
             std::make_tuple(y.start_ns, y.kind == Kind::kMemory, -y.end_ns, b);
    });
    std::vector<size_t> open;
    for (const size_t i : indices) {
      const auto& event = events[i];
      while (!open.empty() && events[open.back()].end_ns <= event.start_ns) open.pop_back();
      if (event.kind == Kind::kMemory) {
        if (!open.empty()) memory[open.back()] += event.bytes;
        continue;
      }
      if (!open.empty()) child_ns[open.back()] += duration_ns(event);
      open.push_back(i);
    }
  }
}

}  // namespace

std::vector<OpRow> summarize_profile(const std::vector<ProfiledEvent>& events) {
  const Phases phases(events);
  std::vector<int64_t> child_ns(events.size(), 0);
  std::vector<int64_t> memory(events.size(), 0);
  nest(events, child_ns, memory);

  std::map<std::tuple<std::string, std::string, std::string>, OpRow> rows;
  auto add = [&rows](const std::string& device, const std::string& phase, const std::string& name,
                     int64_t self_ns, int64_t total_ns, int64_t bytes) {
    OpRow& row = rows[{device, phase, name}];
    row.device = device;
    row.phase = phase;
    row.name = name;
    ++row.count;
    row.self_s += static_cast<double>(self_ns) / kNsPerS;
    row.total_s += static_cast<double>(total_ns) / kNsPerS;
    row.self_cpu_memory_bytes += static_cast<double>(bytes);
  };
  std::unordered_map<uint64_t, std::string> phase_of_correlation;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& event = events[i];
    if (event.kind != Kind::kOp) continue;
    const std::string phase = phases.at(event.start_ns);
    if (event.correlation != 0) phase_of_correlation[event.correlation] = phase;
    const int64_t total = duration_ns(event);
    add("cpu", phase, event.name, std::max<int64_t>(0, total - child_ns[i]), total, memory[i]);
  }
  for (const auto& event : events) {
    if (event.kind != Kind::kKernel) continue;
    const auto found = phase_of_correlation.find(event.link);
    const std::string phase = found == phase_of_correlation.end() ? "" : found->second;
    add("cuda", phase, event.name, duration_ns(event), duration_ns(event), 0);
  }
  std::vector<OpRow> table;
  table.reserve(rows.size());
  for (auto& [key, row] : rows) table.push_back(std::move(row));
  std::stable_sort(table.begin(), table.end(),
                   [](const OpRow& a, const OpRow& b) { return a.self_s > b.self_s; });
  return table;
}

nlohmann::json to_json(const OpProfile& profile) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& op : profile.ops) {
    ops.push_back(
        {op.name, op.phase, op.device, op.count, op.self_s, op.total_s, op.self_cpu_memory_bytes});
  }
  return {{"steps", profile.steps}, {"activities", profile.activities}, {"ops", ops}};
}

OpProfile op_profile_from_json(const nlohmann::json& json) {
  OpProfile profile;
  profile.steps = json.at("steps").get<int64_t>();
  profile.activities = json.at("activities").get<std::vector<std::string>>();
  for (const auto& op : json.at("ops")) {
    profile.ops.push_back({.name = op.at(0).get<std::string>(),
                           .phase = op.at(1).get<std::string>(),
                           .device = op.at(2).get<std::string>(),
                           .count = op.at(3).get<int64_t>(),
                           .self_s = op.at(4).get<double>(),
                           .total_s = op.at(5).get<double>(),
                           .self_cpu_memory_bytes = op.at(6).get<double>()});
  }
  return profile;
}

}  // namespace scalebench
