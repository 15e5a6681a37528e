#include "results/profile_table.h"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>

#include "common/hdf5/wrappers.h"

namespace scalebench::results {

void write_profile(hid_t cell_group, const std::vector<RankResult>& ranks) {
  const bool any = std::any_of(ranks.begin(), ranks.end(),
                               [](const RankResult& rank) { return rank.profile.has_value(); });
  if (!any) return;
  int64_t steps = 0;
  std::vector<std::string> activities;
  std::vector<double> values;
  std::vector<std::string> names;
  std::vector<std::string> phases;
  std::vector<std::string> devices;
  for (const auto& rank : ranks) {
    if (!rank.profile) continue;
    steps = std::max(steps, rank.profile->steps);
    for (const auto& activity : rank.profile->activities) {
      if (std::find(activities.begin(), activities.end(), activity) == activities.end()) {
        activities.push_back(activity);
      }
    }
    for (const auto& op : rank.profile->ops) {
      values.insert(values.end(),
                    {static_cast<double>(rank.group_rank), static_cast<double>(op.count), op.self_s,
                     op.total_s, op.self_cpu_memory_bytes});
      names.push_back(op.name);
      phases.push_back(op.phase);
      devices.push_back(op.device);
    }
  }
  const Hdf5Handle group = h5::create_group(cell_group, kProfileGroup);
  h5::write_int64_attribute(group, "steps", steps);
  h5::write_string_attribute(group, "activities", nlohmann::json(activities).dump());
  if (names.empty()) return;
  constexpr size_t kColumns = std::size(kProfileColumns);
  const Hdf5Handle ops = h5::write_double_dataset(group, "ops", {names.size(), kColumns}, values);
  h5::write_string_attribute(ops, "columns",
                             nlohmann::json(std::vector<std::string>(std::begin(kProfileColumns),
                                                                     std::end(kProfileColumns)))
                                 .dump());
  h5::write_string_dataset(group, "names", names);
  h5::write_string_dataset(group, "phases", phases);
  h5::write_string_dataset(group, "devices", devices);
}

}  // namespace scalebench::results
