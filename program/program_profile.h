// The operator profile of a program cell (setting `profile_steps`, docs/profiles.md#program-cells):
// the `profile` record a program's client sends, checked, and what a rank keeps of it. Pure:
// no process, no MPI.
//
// Note [Program profiles]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A built-in cell profiles its own steps (Note [Operator profiles] in common/cell/op_profile.h);
// a program cell's steps are its program's, so the program profiles them, through
// scalebench_client (scalebench_client/profiling.py):
//  * asking: a cell with `profile_steps: N` asks its program for N more steps: `{steps}` is
//    warm-up + iterations + N, and SCALEBENCH_PROFILE_STEPS tells the client N (with
//    SCALEBENCH_WARMUP and SCALEBENCH_ITERATIONS, so it knows where they begin). `{warmup}`
//    and `{iterations}` stay the measured counts: a program that counts its steps from them
//    runs no profiled step unless it adds scalebench_client.profile_steps();
//  * steps: the client marks each step after the measured ones `"profile": true`; such steps
//    are never in ProgramReport::steps, so they are no row of `timings`, no part of the
//    summary, and no step of the check of Note [Program steps asked and run] (which counts
//    only the steps beyond the N profiled ones as steps run beyond those asked). Their
//    durations give the rank metric `profile_step_s`, the profiler's cost as for built-in
//    cells. A measured step after a profiled one is refused (the cell fails: the client's
//    order is broken);
//  * the table: the client runs the profiled steps under torch.profiler with a scope
//    `scalebench.phase/<name>` per phase and one for the step, reduces the events itself
//    with the rules of Note [Operator profiles] (profile_rows.py) and sends one `profile`
//    record: `steps`, `activities`, `ops` as [name, phase, device, count, self_s, total_s,
//    self_cpu_memory_bytes] rows, or `error` when it could not profile (a JAX or Keras
//    adapter, no torch imported, a profiler that failed). The record is one line, so it fits
//    kMaxRecordBytes: the client drops the rows of least self time that do not fit and says
//    how many (`dropped_rows`, `dropped_self_s`); the rank says so among the ineffective
//    reasons;
//  * trust: the record comes from the program, so it is checked (profile_of_record): at most
//    kMaxProfileRows rows, names of at most kMaxProfileNameBytes bytes without a control
//    character (JSON strings are valid UTF-8 once parsed), phases as phase names are, devices
//    `cpu` or `cuda`, counts non-negative integers, times finite and non-negative, memory
//    finite. A record that fails any check, or a line that names type "profile" but is not
//    JSON, leaves the rank without a table, the reason quoted among its ineffective reasons:
//    the profile is never part of the measured figures, so it never fails the cell;
//  * storage: the table becomes RankResult::profile, and rank 0 stores it as it stores a
//    built-in cell's (results/profile_table.h): `analyze --ops` and `compare --ops`
//    read both alike.
// Memory: the client keeps the figures memory() would report just before the profiler
// starts and reports those from then on, so the peak is the measured steps'. Metrics and
// outputs a program reports after its loop come after the profiled steps (N more steps of
// training): docs/profiles.md says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "common/cell/cell_spec.h"
#include "common/cell/messages.h"
#include "common/cell/op_profile.h"
#include "program/program_report.h"

namespace scalebench {

/// Note [Program profiles]: what a `profile` record may hold.
inline constexpr std::size_t kMaxProfileRows = 8192;
inline constexpr std::size_t kMaxProfileNameBytes = 1024;

/// The table of a `profile` record without `error`, rows sorted by self time descending.
/// Throws std::invalid_argument naming the first field that is missing, of another type or
/// out of its bounds (Note [Program profiles]).
OpProfile profile_of_record(const nlohmann::json& record);

/// The ProgramProfile of a `profile` record: its table, or the client's `error`, or the
/// reason it was refused, quoting `line` (the record's text). Never throws for the record's
/// content.
ProgramProfile program_profile(const nlohmann::json& record, const std::string& line);

/// Whether `line`, which is not a JSON object, names type "profile" (a damaged profile
/// record: Note [Program profiles] records it rather than failing the cell).
bool names_profile_type(std::string_view line);

/// Note [Program profiles]: records in `result` what the rank's program profiled, for a cell
/// with `profile_steps` > 0 whose rank ended well: RankResult::profile and the metrics
/// `profile_steps` and `profile_step_s`, or why there is no table (ineffective_reasons; and
/// untrusted_reasons when a program without the client ran the profiled steps inside its
/// one wall-time measurement).
void record_program_profile(RankResult& result, const ProgramReport& report, const CellSpec& cell);

}  // namespace scalebench
