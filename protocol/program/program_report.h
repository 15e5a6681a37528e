// The records a program cell's program sends on its report channel, and what a worker makes
// of them (docs/programs.md, schemas/program-records.md). Pure: no process, no MPI.
//
// Note [Program report channel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// One JSON object per line (at most kMaxRecordBytes), each with "v" (kRecordVersion) and
// "type": hello | step | metric | memory | outputs | error | summary. Times are CLOCK_MONOTONIC
// integer nanoseconds (Python's time.monotonic_ns(), the worker's steady_clock), so the worker puts
// them on the group's shared clock without any exchange. A line that is not such a record fails the
// cell with the line quoted: the channel is the program's private, framed report, never a scrape of
// its stdout.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/base/error.h"

namespace scalebench {

inline constexpr int kRecordVersion = 1;
inline constexpr std::size_t kMaxRecordBytes = std::size_t{64} << 10;

/// A line of the channel that is not a valid record. The message quotes (the start of) it.
class ProgramRecordError : public Error {
 public:
  using Error::Error;
};

/// One `step` record: begin/end of the step and of each phase it timed, in seconds.
struct ProgramStep {
  bool warmup = false;
  double begin = 0.0;
  double end = 0.0;
  std::map<std::string, std::pair<double, double>> phases;  ///< name -> [begin, end]
  std::vector<std::string> phase_order;                     ///< names in begin order
};

/// Everything one rank's program reported.
struct ProgramReport {
  bool hello = false;
  std::string framework;
  std::map<std::string, std::string> versions;
  int hello_rank = -1;
  int hello_world_size = -1;
  std::vector<ProgramStep> steps;
  std::map<std::string, double> metrics;  ///< last value of each
  /// Note [Accuracy across cells]: samples of outputs the program wrote to its outputs file
  /// (SCALEBENCH_OUTPUTS_FILE, float32) and the shape of one sample.
  int64_t output_samples = 0;
  std::vector<int64_t> output_sample_shape;
  double peak_memory_bytes = -1.0;
  std::string memory_kind;                ///< "cuda" or "rss"
  std::optional<std::string> error_kind;  ///< "oom" or "error"
  std::string error_message;
  bool summary = false;
};

/// Adds one line (without its newline) to `report`. Throws ProgramRecordError for a line
/// that is too long, not JSON, of another major version, or missing a field of its type.
void apply_record(ProgramReport& report, const std::string& line);

/// Splits `buffer` at newlines, applying each complete line and leaving the incomplete rest
/// in `buffer`. Throws like apply_record, and for a partial line above kMaxRecordBytes.
void apply_records(ProgramReport& report, std::string& buffer);

/// The timings of `report` as a rank's result: `phases` (every reported phase in first-seen
/// order, then `step_phase` spanning the step), row-major `timings_s` and `phase_starts_s`
/// (seconds since `origin_s`, NaN where a phase was not reported), `warmup_iterations` (the
/// leading warm-up steps). No steps: one row, `step_phase` = `wall_s`, starting at 0.
struct ProgramTimings {
  std::vector<std::string> phases;
  std::vector<double> timings_s;
  std::vector<double> phase_starts_s;
  int warmup_iterations = 0;
};
ProgramTimings program_timings(const ProgramReport& report, const std::string& step_phase,
                               double origin_s, double wall_s);

}  // namespace scalebench
