#include "protocol/program/program_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace scalebench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

[[noreturn]] void refuse(const std::string& line, const std::string& why) {
  constexpr std::size_t kQuoted = 200;
  std::string quoted = line.substr(0, kQuoted);
  if (line.size() > kQuoted) quoted += "...";
  throw ProgramRecordError("program report: " + why + " in record '" + quoted + "'");
}

double number(const nlohmann::json& record, const char* key, const std::string& line) {
  const auto it = record.find(key);
  if (it == record.end() || !it->is_number()) refuse(line, std::string("no number '") + key + "'");
  return it->get<double>();
}

constexpr double kNsPerSecond = 1e9;

/// A CLOCK_MONOTONIC time in integer nanoseconds, as seconds.
double time_ns(const nlohmann::json& record, const char* key, const std::string& line) {
  const auto it = record.find(key);
  if (it == record.end() || !it->is_number_integer()) {
    refuse(line, std::string("no integer '") + key + "'");
  }
  return static_cast<double>(it->get<int64_t>()) / kNsPerSecond;
}

std::pair<double, double> span(const nlohmann::json& value, const std::string& line) {
  if (!value.is_array() || value.size() != 2 || !value[0].is_number_integer() ||
      !value[1].is_number_integer()) {
    refuse(line, "a phase is not [begin_ns, end_ns]");
  }
  const double begin = static_cast<double>(value[0].get<int64_t>()) / kNsPerSecond;
  const double end = static_cast<double>(value[1].get<int64_t>()) / kNsPerSecond;
  if (!(end >= begin)) refuse(line, "a phase ends before it begins");
  return {begin, end};
}

}  // namespace

void apply_record(ProgramReport& report, const std::string& line) {
  if (line.size() > kMaxRecordBytes) refuse(line, "a record above 64 KiB");
  const auto record = nlohmann::json::parse(line, nullptr, false);
  if (record.is_discarded() || !record.is_object()) refuse(line, "not a JSON object");
  const auto version = record.find("v");
  if (version == record.end() || !version->is_number_integer()) refuse(line, "no version 'v'");
  if (version->get<int>() != kRecordVersion) {
    refuse(line, "record version " + std::to_string(version->get<int>()) +
                     " (this scalebench reads " + std::to_string(kRecordVersion) +
                     "; update scalebench or the client)");
  }
  const std::string type = record.value("type", std::string());
  if (type == "hello") {
    report.hello = true;
    report.framework = record.value("framework", std::string());
    report.hello_rank = record.value("rank", -1);
    report.hello_world_size = record.value("world_size", -1);
    if (const auto v = record.find("versions"); v != record.end() && v->is_object()) {
      for (const auto& [name, value] : v->items()) {
        if (value.is_string()) report.versions[name] = value.get<std::string>();
      }
    }
  } else if (type == "step") {
    ProgramStep step;
    step.warmup = record.value("warmup", false);
    step.begin = time_ns(record, "begin_ns", line);
    step.end = time_ns(record, "end_ns", line);
    if (!(step.end >= step.begin)) refuse(line, "a step ends before it begins");
    if (const auto phases = record.find("phases"); phases != record.end()) {
      if (!phases->is_object()) refuse(line, "'phases' is not an object");
      for (const auto& [name, value] : phases->items()) {
        if (name == "step" || name == "batch") {  // the iteration's own column
          refuse(line, "a phase named '" + name +
                           "': that is the iteration's own column; name the phase "
                           "otherwise (e.g. 'compute')");
        }
        step.phases[name] = span(value, line);
        step.phase_order.push_back(name);
      }
      std::sort(step.phase_order.begin(), step.phase_order.end(),
                [&](const std::string& a, const std::string& b) {
                  return step.phases[a].first < step.phases[b].first;
                });
    }
    if (!report.steps.empty() && step.warmup && !report.steps.back().warmup) {
      refuse(line, "a warm-up step after a measured one");
    }
    report.steps.push_back(std::move(step));
  } else if (type == "metric") {
    const auto name = record.find("name");
    if (name == record.end() || !name->is_string()) refuse(line, "no string 'name'");
    report.metrics[name->get<std::string>()] = number(record, "value", line);
  } else if (type == "memory") {
    report.peak_memory_bytes =
        std::max(report.peak_memory_bytes, number(record, "peak_bytes", line));
    report.memory_kind = record.value("kind", std::string());
  } else if (type == "error") {
    const std::string kind = record.value("kind", std::string("error"));
    report.error_kind = kind == "oom" ? "oom" : "error";
    report.error_message = record.value("message", std::string());
  } else if (type == "outputs") {  // Note [Accuracy across cells]
    const auto samples = record.find("samples");
    const auto shape = record.find("shape");
    if (samples == record.end() || !samples->is_number_integer() || samples->get<int64_t>() < 0) {
      refuse(line, "no sample count 'samples'");
    }
    if (shape == record.end() || !shape->is_array() ||
        !std::all_of(shape->begin(), shape->end(), [](const nlohmann::json& d) {
          return d.is_number_integer() && d.get<int64_t>() > 0;
        })) {
      refuse(line, "'shape' is not a list of positive sizes");
    }
    const auto sample_shape = shape->get<std::vector<int64_t>>();
    if (report.output_samples > 0 && sample_shape != report.output_sample_shape) {
      refuse(line, "outputs of another sample shape than the earlier ones");
    }
    report.output_sample_shape = sample_shape;
    report.output_samples += samples->get<int64_t>();
  } else if (type == "summary") {
    report.summary = true;
  } else {
    refuse(line, "unknown type '" + type + "'");
  }
}

void apply_records(ProgramReport& report, std::string& buffer) {
  std::size_t start = 0;
  for (std::size_t newline = buffer.find('\n'); newline != std::string::npos;
       newline = buffer.find('\n', start)) {
    const std::string line = buffer.substr(start, newline - start);
    start = newline + 1;
    if (!line.empty()) apply_record(report, line);
  }
  buffer.erase(0, start);
  if (buffer.size() > kMaxRecordBytes) refuse(buffer, "a record above 64 KiB");
}

ProgramTimings program_timings(const ProgramReport& report, const std::string& step_phase,
                               double origin_s, double wall_s) {
  ProgramTimings out;
  if (report.steps.empty()) {
    out.phases = {step_phase};
    out.timings_s = {wall_s};
    out.phase_starts_s = {0.0};
    return out;
  }
  for (const auto& step : report.steps) {
    for (const auto& name : step.phase_order) {
      if (name != step_phase &&
          std::find(out.phases.begin(), out.phases.end(), name) == out.phases.end()) {
        out.phases.push_back(name);
      }
    }
    if (step.warmup) ++out.warmup_iterations;
  }
  out.phases.push_back(step_phase);
  for (const auto& step : report.steps) {
    for (const auto& name : out.phases) {
      if (name == step_phase) {
        out.timings_s.push_back(step.end - step.begin);
        out.phase_starts_s.push_back(step.begin - origin_s);
        continue;
      }
      const auto found = step.phases.find(name);
      out.timings_s.push_back(
          found == step.phases.end() ? kNaN : found->second.second - found->second.first);
      out.phase_starts_s.push_back(found == step.phases.end() ? kNaN
                                                              : found->second.first - origin_s);
    }
  }
  return out;
}

}  // namespace scalebench
