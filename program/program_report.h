// The records a program cell's program sends on its report channel, and what a worker makes
// of them (docs/programs.md, schemas/program-records.md). Pure: no process, no MPI.
//
// Note [Program report channel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// One JSON object per line (at most kMaxRecordBytes), each with "v" (kRecordVersion) and
// "type": hello | step | metric | memory | outputs | error | ended | code | profile | segment |
// summary.
// Times are CLOCK_MONOTONIC integer nanoseconds (Python's time.monotonic_ns(), the worker's
// steady_clock), so the worker puts them on the group's shared clock without any exchange. A line
// that is not such a record fails the cell with the line quoted: the channel is the program's
// private, framed report, never a scrape of its stdout.
//
// Note [Program record bounds]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A program is not trusted to be sane (issue 41), so what a worker keeps of its records is
// bounded whatever it sends, and a time it could not have measured is refused:
//  * memory: a line is never read past kMaxRecordBytes (report_pipe.h reads no further than
//    the limit and the line's newline); at most max_steps step records (step_limit: twice
//    warm-up + iterations, plus kStepMargin, so a loop off by a few steps still passes), at
//    most kMaxPhaseNames distinct phase names and kMaxMetricNames metric names of at most
//    kMaxNameBytes each; a later hello replaces the earlier. A flood of step records fails
//    the cell at max_steps + 1 with the record quoted, and the program is ended.
//  * time: each step and phase lies inside the program's life, from just before its launch
//    (launch_ns) to the moment the worker read the line (read_ns; at most its exit), and each
//    phase inside its step, all within the clock's resolution (resolution_ns): the client's
//    times are CLOCK_MONOTONIC, the worker's steady_clock, so a time outside is a bug or a lie,
//    never a clock offset. A time above INT64_MAX ns (2^63 - 1: 292 years of uptime) is
//    refused as such, not wrapped into a negative one.
//  * text: a record quoted in a reason is cut at 200 bytes on a character boundary and shown
//    with printable_line() (control characters escaped, invalid UTF-8 replaced); names with a
//    control character are refused, and the error message, framework and versions are kept as
//    printable_output()/printable_line() make them (docs/programs.md#failures).
//  * outputs: the announced samples x the sample's shape x 4 bytes are computed without
//    overflow and may not exceed kMaxOutputBytes.
//  * segment: at most kMaxSegmentNames distinct names; each name keeps its summed time and
//    count, never one entry per occurrence, so an endless stream of segments costs nothing.
//  * profile: a `profile` record (Note [Program profiles], program/program_profile.h)
//    that is not what it must be leaves the cell without an operator table, its reason quoted;
//    it never fails the cell, as the profile is no part of the measured figures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/cell/op_profile.h"

namespace scalebench {

inline constexpr int kRecordVersion = 1;
inline constexpr std::size_t kMaxRecordBytes = std::size_t{64} << 10;
/// Note [Program record bounds]: what a report may hold.
inline constexpr int64_t kStepMargin = 100;
inline constexpr std::size_t kMaxPhaseNames = 256;
inline constexpr std::size_t kMaxMetricNames = 1024;
inline constexpr std::size_t kMaxNameBytes = 256;
inline constexpr std::size_t kMaxSegmentNames = 64;
inline constexpr int64_t kMaxOutputBytes = int64_t{1} << 30;

/// Note [Program record bounds]: the steps a program of `warmup` + `iterations` steps may
/// report: twice that, plus kStepMargin.
[[nodiscard]] int64_t step_limit(int64_t warmup, int64_t iterations);

/// What a line must respect beyond its syntax (Note [Program record bounds]); times are
/// steady_clock (CLOCK_MONOTONIC) nanoseconds. The defaults bound nothing.
struct RecordBounds {
  int64_t launch_ns = std::numeric_limits<int64_t>::min();  ///< just before the launch
  int64_t read_ns = std::numeric_limits<int64_t>::max();    ///< when the line was read
  int64_t resolution_ns = 1;  ///< the clock's resolution: the slack of every comparison
  int64_t max_steps = std::numeric_limits<int64_t>::max();
};

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

/// Note [Run-level segments]
/// ~~~~~~~~~~~~~~~~~~~~~~~~~~
/// A program's time outside its steps, in named `segment` records {name, begin_ns, end_ns}
/// (the Lightning adapter: `data_setup`, `model_setup`, `sanity_check`, `validation`,
/// `checkpoint_save`, `fit`, ...; any program: scalebench_client.segment()). Per name the
/// worker keeps the summed time and the count; with the steps it adds the parts every program
/// has: launch to the first segment (`program_before_segments_s`: what the program did before
/// its adapter's first segment, e.g. building the model and data objects before a Lightning
/// Trainer), launch to the first step (`program_startup_s`), the steps' span (first begin to last
/// end) and the time after the last step to the exit (teardown, the last validation, writing
/// outputs), which with the program's whole wall time (`loop_wall_s`) say where a run's time
/// went (docs/programs.md#run-level-segments). Segments may nest or overlap (`fit` holds the
/// steps and every validation): they are named spans, not a partition.
struct ProgramSegment {
  double total_s = 0;  ///< summed over the occurrences
  int64_t count = 0;
  double first_begin_s = 0;  ///< the earliest begin, on the worker's clock (seconds)
};

/// The `code` record (Note [Program code identity], program/program_checks.h): which
/// code of the branch's tree the program ran. Texts bounded and printable.
struct ProgramCode {
  struct Package {
    std::string name;
    std::string file;  ///< "" when the program did not import it
    std::string origin;
    bool in_tree = true;
  };
  std::string tree;
  std::string digest;  ///< "sha256:<hex>" of the tree's imported sources
  int64_t files = 0;
  std::vector<Package> packages;
  std::string error;  ///< the client could not tell (then nothing else is set)
};

/// The `profile` record (Note [Program profiles], program/program_profile.h).
struct ProgramProfile {
  OpProfile table;            ///< the operator table, self time descending
  int64_t dropped_rows = 0;   ///< rows the client left out to fit the record
  double dropped_self_s = 0;  ///< their self time
  std::string problem;        ///< why there is no table ("" when there is): the client's
                              ///< error, or the record refused (quoted)
};

/// Everything one rank's program reported.
struct ProgramReport {
  bool hello = false;
  std::string framework;
  std::map<std::string, std::string> versions;
  int hello_rank = -1;
  int hello_world_size = -1;
  std::vector<ProgramStep> steps;
  std::set<std::string> phase_names;      ///< distinct phase names (Note [Program record bounds])
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
  /// Note [Program steps asked and run]: the last `ended` record ("" without one).
  std::string ended_by;
  std::string ended_message;
  std::optional<ProgramCode> code;  ///< the `code` record (Note [Program code identity])
  /// Note [Program profiles]: the steps after the measured ones (`"profile": true`), never in
  /// `steps`: their durations in seconds, and the last `profile` record.
  std::vector<double> profiled_step_s;
  std::optional<ProgramProfile> profile;
  std::map<std::string, ProgramSegment> segments;  ///< Note [Run-level segments]
};

/// The start of a record's line as a reason quotes it: at most 200 bytes, cut on a character
/// boundary, made printable, "..." when cut (Note [Program record bounds]).
std::string quoted_record(const std::string& line);

/// Adds one line (without its newline) to `report`. Throws ProgramRecordError for a line
/// that is too long, not JSON, of another major version, missing a field of its type, or
/// outside `bounds` (Note [Program record bounds]).
void apply_record(ProgramReport& report, const std::string& line, const RecordBounds& bounds);

/// Splits `buffer` at newlines, applying each complete line and leaving the incomplete rest
/// in `buffer`. Throws like apply_record, and for a partial line above kMaxRecordBytes.
void apply_records(ProgramReport& report, std::string& buffer, const RecordBounds& bounds);

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
