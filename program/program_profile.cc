#include "program/program_profile.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "common/base/escaped_text.h"
#include "common/cell/program.h"
#include "common/cell/stats.h"

namespace scalebench {
namespace {

constexpr double kMsPerS = 1e3;

[[noreturn]] void invalid(const std::string& why) { throw std::invalid_argument(why); }

/// A name of the table: text of at most `max_bytes` bytes without a control character.
std::string name_field(const nlohmann::json& value, const char* what, std::size_t max_bytes) {
  if (!value.is_string()) invalid(std::string("a row's ") + what + " is not text");
  auto text = value.get<std::string>();
  if (text.size() > max_bytes) {
    invalid(std::string("a row's ") + what + " above " + std::to_string(max_bytes) + " bytes");
  }
  if (printable_line(text) != text) {
    invalid(std::string("a row's ") + what + " with a control character");
  }
  return text;
}

/// A time or a byte count (`what` names it): a finite number, non-negative unless `signed_ok`.
double number_field(const nlohmann::json& value, const std::string& what, bool signed_ok) {
  if (!value.is_number()) invalid(what + " is not a number");
  const auto number = value.get<double>();
  if (!std::isfinite(number)) invalid(what + " is not finite");
  if (!signed_ok && number < 0) invalid(what + " is negative");
  return number;
}

/// `value` with three significant digits.
std::string short_number(double value) {
  std::ostringstream text;
  text << std::setprecision(3) << value;
  return text.str();
}

OpRow row_of(const nlohmann::json& op) {
  if (!op.is_array() || op.size() != 7) {
    invalid("a row is not [name, phase, device, count, self_s, total_s, self_cpu_memory_bytes]");
  }
  OpRow row;
  row.name = name_field(op[0], "name", kMaxProfileNameBytes);
  row.phase = name_field(op[1], "phase", kMaxNameBytes);
  row.device = name_field(op[2], "device", kMaxNameBytes);
  if (row.device != "cpu" && row.device != "cuda") invalid("a row's device is not cpu or cuda");
  if (!op[3].is_number_integer() || op[3].get<int64_t>() < 0) {
    invalid("a row's count is not a non-negative integer");
  }
  row.count = op[3].get<int64_t>();
  row.self_s = number_field(op[4], "a row's self_s", false);
  row.total_s = number_field(op[5], "a row's total_s", false);
  row.self_cpu_memory_bytes = number_field(op[6], "a row's self_cpu_memory_bytes", true);
  return row;
}

int64_t count_field(const nlohmann::json& record, const char* key) {
  const auto it = record.find(key);
  if (it == record.end() || !it->is_number_integer() || it->get<int64_t>() < 0) {
    invalid(std::string("no non-negative integer '") + key + "'");
  }
  return it->get<int64_t>();
}

/// Why a cell asking for profiled steps has no `profile` record of its program.
std::string no_record_reason(const ProgramReport& report, const CellSpec& cell) {
  const std::string asked = std::to_string(cell.profile_steps);
  if (report.steps.empty()) {
    return "the program reported no steps (no scalebench_client), so none was profiled";
  }
  if (report.profiled_step_s.empty()) {
    return "the program ran no step after its " + std::to_string(report.steps.size()) +
           " warm-up and measured ones, so none was profiled: it counts its steps from "
           "{warmup} and {iterations}, or stops at its own limit; pass {steps} (which includes "
           "the " +
           asked + " profiled steps) or add scalebench_client.profile_steps() to its count";
  }
  return "the program ran " + std::to_string(report.profiled_step_s.size()) +
         " steps after its measured ones but sent no profile record (a scalebench_client "
         "older than this scalebench?)";
}

/// Whether the program's command or environment uses `{steps}` (Note [Program placeholders]).
bool uses_steps(const ProgramSpec& program) {
  const auto has = [](const std::string& text) {
    try {
      const auto names = placeholder_names(text);
      return std::find(names.begin(), names.end(), "steps") != names.end();
    } catch (const std::invalid_argument&) {
      return false;
    }
  };
  return std::any_of(program.command.begin(), program.command.end(), has) ||
         std::any_of(program.env.begin(), program.env.end(),
                     [&](const auto& entry) { return has(entry.second); });
}

}  // namespace

OpProfile profile_of_record(const nlohmann::json& record) {
  OpProfile profile;
  profile.steps = count_field(record, "steps");
  const auto activities = record.find("activities");
  if (activities == record.end() || !activities->is_array() || activities->size() > 2) {
    invalid("no list 'activities' (cpu, cuda)");
  }
  for (const auto& activity : *activities) {
    if (!activity.is_string() || (activity != "cpu" && activity != "cuda")) {
      invalid("an activity that is not cpu or cuda");
    }
    profile.activities.push_back(activity.get<std::string>());
  }
  const auto ops = record.find("ops");
  if (ops == record.end() || !ops->is_array()) invalid("no list 'ops'");
  if (ops->size() > kMaxProfileRows) {
    invalid("more than " + std::to_string(kMaxProfileRows) + " rows");
  }
  profile.ops.reserve(ops->size());
  for (const auto& op : *ops) profile.ops.push_back(row_of(op));
  std::stable_sort(profile.ops.begin(), profile.ops.end(),
                   [](const OpRow& a, const OpRow& b) { return a.self_s > b.self_s; });
  return profile;
}

ProgramProfile program_profile(const nlohmann::json& record, const std::string& line) {
  ProgramProfile profile;
  try {
    if (const auto error = record.find("error"); error != record.end()) {
      if (!error->is_string()) invalid("'error' is not text");
      profile.problem = "the client took no profile: " +
                        printable_line(utf8_prefix(error->get<std::string>(), 1024));
      return profile;
    }
    profile.table = profile_of_record(record);
    if (record.contains("dropped_rows")) {
      profile.dropped_rows = count_field(record, "dropped_rows");
      const auto dropped_s = record.find("dropped_self_s");
      if (dropped_s != record.end())
        profile.dropped_self_s = number_field(*dropped_s, "'dropped_self_s'", false);
    }
  } catch (const std::invalid_argument& e) {
    profile = ProgramProfile{};
    profile.problem = "its profile record was refused: " + std::string(e.what()) + " in record '" +
                      quoted_record(line) + "'";
  }
  return profile;
}

bool names_profile_type(std::string_view line) {
  constexpr std::string_view kType = "\"type\"";
  for (auto at = line.find(kType); at != std::string_view::npos; at = line.find(kType, at + 1)) {
    auto rest = line.substr(at + kType.size());
    const auto skip = [&rest] {
      while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    };
    skip();
    if (rest.empty() || rest.front() != ':') continue;
    rest.remove_prefix(1);
    skip();
    if (rest.starts_with("\"profile\"")) return true;
  }
  return false;
}

void record_program_profile(RankResult& result, const ProgramReport& report, const CellSpec& cell) {
  if (cell.profile_steps <= 0 || result.status != CellStatus::kOk) return;
  const std::string setting = "profile_steps: ";
  if (!report.profile) {
    result.ineffective_reasons.push_back(setting + no_record_reason(report, cell));
    if (report.steps.empty() && uses_steps(cell.program)) {
      result.untrusted_reasons.push_back(
          "profile_steps: the program reported no steps (no scalebench_client), so its one "
          "measurement, its wall time, includes the " +
          std::to_string(cell.profile_steps) +
          " more steps that {steps} asked for profiling; run it without profile_steps");
    }
    return;
  }
  const ProgramProfile& profile = *report.profile;
  if (!profile.problem.empty()) {
    result.ineffective_reasons.push_back(setting + profile.problem);
    return;
  }
  if (profile.table.steps == 0) {
    result.ineffective_reasons.push_back(setting + "the program's profile holds no step");
    return;
  }
  result.metrics["profile_steps"] = static_cast<double>(profile.table.steps);
  if (!report.profiled_step_s.empty()) {
    result.metrics["profile_step_s"] = percentile(report.profiled_step_s, 50.0);
  }
  if (profile.table.steps < cell.profile_steps) {
    result.ineffective_reasons.push_back(
        setting + "the program ran " + std::to_string(profile.table.steps) + " of the " +
        std::to_string(cell.profile_steps) +
        " profiled steps asked (it stopped before {steps}); the table holds those");
  }
  if (profile.dropped_rows > 0) {
    result.ineffective_reasons.push_back(
        setting + "the table holds the " + std::to_string(profile.table.ops.size()) +
        " rows of most self time; " + std::to_string(profile.dropped_rows) + " more (" +
        short_number(profile.dropped_self_s * kMsPerS) +
        " ms of self time in all) did not fit the client's record of 64 KiB");
  }
  result.profile = profile.table;
}

}  // namespace scalebench
