#include "program/program_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include "common/base/escaped_text.h"
#include "common/cell/stats.h"
#include "program/program_checks.h"
#include "program/program_profile.h"

namespace scalebench {
namespace {

constexpr std::size_t kQuotedBytes = 200;

[[noreturn]] void refuse(const std::string& line, const std::string& why) {
  throw ProgramRecordError("program report: " + why + " in record '" + quoted_record(line) + "'");
}

double number(const nlohmann::json& record, const char* key, const std::string& line) {
  const auto it = record.find(key);
  if (it == record.end() || !it->is_number()) refuse(line, std::string("no number '") + key + "'");
  return it->get<double>();
}

/// A metric's value: a number, or one of the texts "nan", "inf", "-inf", which stand for the
/// figures JSON cannot write (a diverged loss is a figure worth keeping, not a broken record;
/// scalebench_client.metric writes them so).
double metric_value(const nlohmann::json& record, const std::string& line) {
  const auto it = record.find("value");
  if (it != record.end() && it->is_string()) {
    const auto& text = it->get_ref<const std::string&>();
    if (text == "nan") return kNaN;
    if (text == "inf") return std::numeric_limits<double>::infinity();
    if (text == "-inf") return -std::numeric_limits<double>::infinity();
    refuse(line, "'value' is neither a number nor one of \"nan\", \"inf\", \"-inf\"");
  }
  return number(record, "value", line);
}

/// The optional field `key` of `record` (a string, a bool or an int), `fallback` when absent;
/// refused when of another type (nlohmann's value() would throw its own error instead).
template <class T>
T optional_field(const nlohmann::json& record, const char* key, T fallback,
                 const std::string& line) {
  const auto it = record.find(key);
  if (it == record.end()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) refuse(line, std::string("'") + key + "' is not text");
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) refuse(line, std::string("'") + key + "' is not true or false");
  } else {
    static_assert(std::is_same_v<T, int>);
    if (!it->is_number_integer() || it->get<int64_t>() < std::numeric_limits<int>::min() ||
        it->get<int64_t>() > std::numeric_limits<int>::max()) {
      refuse(line, std::string("'") + key + "' is not an integer");
    }
  }
  return it->get<T>();
}

constexpr double kNsPerSecond = 1e9;
/// Longest `ended` message kept (Note [Program steps asked and run]).
constexpr std::size_t kMaxEndedBytes = 1024;

/// A CLOCK_MONOTONIC time in integer nanoseconds; `what` names it in a refusal.
int64_t integer_ns(const nlohmann::json& value, const std::string& what, const std::string& line) {
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    refuse(line, what + " = " + value.dump() +
                     " ns is above the largest CLOCK_MONOTONIC time (2^63 - 1 ns); times are "
                     "time.monotonic_ns()");
  }
  if (!value.is_number_integer()) refuse(line, what + " is not an integer of nanoseconds");
  return value.get<int64_t>();
}

/// [begin, end] of a step or phase, in nanoseconds, checked against `bounds`.
struct SpanNs {
  int64_t begin = 0;
  int64_t end = 0;
};

/// Refuses a span that is not inside [low, high] (within the clock's resolution).
void check_inside(const SpanNs& span, int64_t low, int64_t high, int64_t slack,
                  const std::string& what, const std::string& line) {
  // In long double: the bounds may be the extremes of int64.
  const auto below = static_cast<long double>(low) - static_cast<long double>(slack);
  const auto above = static_cast<long double>(high) + static_cast<long double>(slack);
  if (static_cast<long double>(span.begin) < below || static_cast<long double>(span.end) > above) {
    refuse(line, what);
  }
}

/// The record's [begin_ns, end_ns] (a step's, a segment's: `what`), refused unless it is an
/// interval inside the program's run.
SpanNs span_in_run(const nlohmann::json& record, const std::string& what,
                   const RecordBounds& bounds, const std::string& line) {
  const auto field = [&](const char* key) {
    const auto it = record.find(key);
    if (it == record.end()) refuse(line, std::string("no integer '") + key + "'");
    return integer_ns(*it, std::string("'") + key + "'", line);
  };
  const SpanNs span{field("begin_ns"), field("end_ns")};
  if (span.end < span.begin) refuse(line, "a " + what + " ends before it begins");
  check_inside(span, bounds.launch_ns, bounds.read_ns, bounds.resolution_ns,
               "a " + what + " outside the program's run (before its launch or after it was read)",
               line);
  return span;
}

std::pair<double, double> seconds(const SpanNs& span) {
  return {static_cast<double>(span.begin) / kNsPerSecond,
          static_cast<double>(span.end) / kNsPerSecond};
}

/// A name the program gave (a phase, a metric): bounded and without control characters, so it
/// is stored and shown as it is (Note [Program record bounds]).
std::string checked_name(const std::string& name, const std::string& what,
                         const std::string& line) {
  if (name.size() > kMaxNameBytes) {
    refuse(line, "a " + what + " name above " + std::to_string(kMaxNameBytes) + " bytes");
  }
  if (printable_line(name) != name) refuse(line, "a " + what + " name with a control character");
  return name;
}

void apply_hello(ProgramReport& report, const nlohmann::json& record, const std::string& line) {
  report.hello = true;
  report.framework = printable_line(optional_field(record, "framework", std::string(), line));
  report.hello_rank = optional_field(record, "rank", -1, line);
  report.hello_world_size = optional_field(record, "world_size", -1, line);
  report.versions.clear();  // a later hello replaces the earlier
  if (const auto v = record.find("versions"); v != record.end() && v->is_object()) {
    for (const auto& [name, value] : v->items()) {
      if (value.is_string())
        report.versions[printable_line(name)] = printable_line(value.get<std::string>());
    }
  }
}

void apply_step(ProgramReport& report, const nlohmann::json& record, const std::string& line,
                const RecordBounds& bounds) {
  if (static_cast<int64_t>(report.steps.size() + report.profiled_step_s.size()) >=
      bounds.max_steps) {
    refuse(line, "more than " + std::to_string(bounds.max_steps) +
                     " steps (twice warm-up + iterations, plus " + std::to_string(kStepMargin) +
                     "); does the program take its step count from {steps} or {iterations}?");
  }
  const SpanNs step_ns = span_in_run(record, "step", bounds, line);
  ProgramStep step;
  step.warmup = optional_field(record, "warmup", false, line);
  const bool profiled = optional_field(record, "profile", false, line);  // Note [Program profiles]
  if (profiled && step.warmup) refuse(line, "a profiled step marked warm-up");
  std::tie(step.begin, step.end) = seconds(step_ns);
  if (const auto phases = record.find("phases"); phases != record.end()) {
    if (!phases->is_object()) refuse(line, "'phases' is not an object");
    for (const auto& [name, value] : phases->items()) {
      if (name == "step" || name == "batch") {  // the iteration's own column
        refuse(line, "a phase named '" + name +
                         "': that is the iteration's own column; name the phase "
                         "otherwise (e.g. 'compute')");
      }
      checked_name(name, "phase", line);
      if (!value.is_array() || value.size() != 2) refuse(line, "a phase is not [begin_ns, end_ns]");
      const SpanNs phase_ns{integer_ns(value[0], "a phase's begin", line),
                            integer_ns(value[1], "a phase's end", line)};
      if (phase_ns.end < phase_ns.begin) refuse(line, "a phase ends before it begins");
      check_inside(phase_ns, step_ns.begin, step_ns.end, bounds.resolution_ns,
                   "phase '" + name + "' outside its step", line);
      if (report.phase_names.insert(name).second && report.phase_names.size() > kMaxPhaseNames) {
        refuse(line, "more than " + std::to_string(kMaxPhaseNames) + " distinct phase names");
      }
      step.phases[name] = seconds(phase_ns);
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
  if (profiled) {  // Note [Program profiles]: never a measured step
    report.profiled_step_s.push_back(step.end - step.begin);
    return;
  }
  if (!report.profiled_step_s.empty()) refuse(line, "a measured step after a profiled one");
  report.steps.push_back(std::move(step));
}

void apply_outputs(ProgramReport& report, const nlohmann::json& record, const std::string& line) {
  // Note [Accuracy across cells]
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
  // Note [Program record bounds]: every product checked, so no size wraps to a small one.
  int64_t total = 0;
  bool overflow = __builtin_add_overflow(report.output_samples, samples->get<int64_t>(), &total);
  int64_t bytes = static_cast<int64_t>(sizeof(float));
  overflow = overflow || __builtin_mul_overflow(bytes, total, &bytes);
  for (const int64_t size : sample_shape) {
    overflow = overflow || __builtin_mul_overflow(bytes, size, &bytes);
  }
  if (overflow || bytes > kMaxOutputBytes) {
    refuse(line, "outputs of more than " + std::to_string(kMaxOutputBytes >> 20) +
                     " MiB in all (float32 samples x the sample's shape); hand fewer samples");
  }
  report.output_sample_shape = sample_shape;
  report.output_samples = total;
}

void apply_segment(ProgramReport& report, const nlohmann::json& record, const std::string& line,
                   const RecordBounds& bounds) {
  // Note [Run-level segments]
  const auto name = record.find("name");
  if (name == record.end() || !name->is_string()) refuse(line, "no string 'name'");
  const std::string checked = checked_name(name->get<std::string>(), "segment", line);
  if (checked.empty()) refuse(line, "an empty segment name");
  const SpanNs span = span_in_run(record, "segment", bounds, line);
  if (!report.segments.count(checked) && report.segments.size() >= kMaxSegmentNames) {
    refuse(line, "more than " + std::to_string(kMaxSegmentNames) + " distinct segment names");
  }
  const auto [begin_s, end_s] = seconds(span);
  ProgramSegment& total = report.segments[checked];
  total.first_begin_s = total.count == 0 ? begin_s : std::min(total.first_begin_s, begin_s);
  total.total_s += end_s - begin_s;
  ++total.count;
}

}  // namespace

std::string quoted_record(const std::string& line) {
  // Note [Program record bounds]: valid UTF-8, one line, no escape sequence.
  std::string quoted = printable_line(utf8_prefix(line, kQuotedBytes));
  if (line.size() > kQuotedBytes) quoted += "...";
  return quoted;
}

int64_t step_limit(int64_t warmup, int64_t iterations) {
  return 2 * (std::max<int64_t>(warmup, 0) + std::max<int64_t>(iterations, 0)) + kStepMargin;
}

void apply_record(ProgramReport& report, const std::string& line, const RecordBounds& bounds) {
  if (line.size() > kMaxRecordBytes) refuse(line, "a record above 64 KiB");
  const auto record = nlohmann::json::parse(line, nullptr, false);
  if ((record.is_discarded() || !record.is_object()) && names_profile_type(line)) {
    ProgramProfile damaged;  // Note [Program profiles]: no table, never a failed cell
    damaged.problem =
        "its profile record was refused: not a JSON object in record '" + quoted_record(line) + "'";
    report.profile = std::move(damaged);
    return;
  }
  if (record.is_discarded() || !record.is_object()) refuse(line, "not a JSON object");
  const auto version = record.find("v");
  if (version == record.end() || !version->is_number_integer()) refuse(line, "no version 'v'");
  if (version->get<int64_t>() != kRecordVersion) {
    refuse(line, "record version " + version->dump() + " (this scalebench reads " +
                     std::to_string(kRecordVersion) + "; update scalebench or the client)");
  }
  const auto type_field = record.find("type");
  const std::string type = type_field != record.end() && type_field->is_string()
                               ? type_field->get<std::string>()
                               : std::string();
  if (type == "hello") {
    apply_hello(report, record, line);
  } else if (type == "step") {
    apply_step(report, record, line, bounds);
  } else if (type == "metric") {
    const auto name = record.find("name");
    if (name == record.end() || !name->is_string()) refuse(line, "no string 'name'");
    const std::string checked = checked_name(name->get<std::string>(), "metric", line);
    if (!report.metrics.count(checked) && report.metrics.size() >= kMaxMetricNames) {
      refuse(line, "more than " + std::to_string(kMaxMetricNames) + " distinct metric names");
    }
    report.metrics[checked] = metric_value(record, line);
  } else if (type == "memory") {
    report.peak_memory_bytes =
        std::max(report.peak_memory_bytes, number(record, "peak_bytes", line));
    report.memory_kind = printable_line(optional_field(record, "kind", std::string(), line));
  } else if (type == "error") {
    const std::string kind = optional_field(record, "kind", std::string("error"), line);
    report.error_kind = kind == "oom" ? "oom" : "error";
    report.error_message = printable_output(optional_field(record, "message", std::string(), line));
  } else if (type == "outputs") {
    apply_outputs(report, record, line);
  } else if (type == "ended") {  // Note [Program steps asked and run]
    report.ended_by = printable_line(
        utf8_prefix(optional_field(record, "by", std::string("other"), line), kMaxNameBytes));
    report.ended_message = printable_line(
        utf8_prefix(optional_field(record, "message", std::string(), line), kMaxEndedBytes));
  } else if (type == "code") {  // Note [Program code identity]
    try {
      report.code = code_of_record(record);
    } catch (const std::invalid_argument& e) {
      refuse(line, e.what());
    }
  } else if (type == "profile") {  // Note [Program profiles]
    report.profile = program_profile(record, line);
  } else if (type == "segment") {
    apply_segment(report, record, line, bounds);
  } else if (type == "summary") {
    report.summary = true;
  } else {
    refuse(line, "unknown type '" + printable_line(utf8_prefix(type, kMaxNameBytes)) + "'");
  }
}

void apply_records(ProgramReport& report, std::string& buffer, const RecordBounds& bounds) {
  std::size_t start = 0;
  for (std::size_t newline = buffer.find('\n'); newline != std::string::npos;
       newline = buffer.find('\n', start)) {
    const std::string line = buffer.substr(start, newline - start);
    start = newline + 1;
    if (!line.empty()) apply_record(report, line, bounds);
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
