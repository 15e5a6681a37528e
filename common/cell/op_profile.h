// Operator profiles of a cell (setting `profile_steps`, docs/profiles.md): the profiler's
// events of the profiled steps reduced to one table per rank, Torch-free.
//
// Note [Operator profiles]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Why a branch is faster is a question about operators: which appeared, disappeared, ran more
// often or got slower. A cell with `profile_steps: N` runs N more iterations after its
// measured ones under LibTorch's profiler (worker/op_profiler.h); they are never rows of
// `timings`, so every measured figure is the one the cell has without profiling (the
// profiler slows what it watches: its cost per step is the rank metric `profile_step_s`
// against the summary's median, docs/profiles.md). A program cell's program profiles its own
// steps through scalebench_client, which reduces the events by these same rules in Python
// (Note [Program profiles] in program/program_profile.h).
//
// The profiler hands a flat list of events (start, end, thread). Three facts are rebuilt here,
// in a pure function with a table test:
//   * self time: an operator's time minus that of the operators nested in it on the same
//     thread (a CPU op calls others: aten::linear -> aten::addmm);
//   * phase: the profiled steps open a user scope per phase of the workload's PhaseTimer
//     (`scalebench.phase/<name>`, PhaseScope on a profiling timer); an event belongs to the
//     innermost phase scope whose interval holds its start, whatever its thread (backward
//     ops run on autograd's threads). The iteration's last phase (`step`, `batch`) spans the
//     others, so what no inner phase holds belongs to it. A GPU kernel runs later than the
//     CPU op that launched it: it takes the phase of that op (the profiler's correlation
//     id), or "" when none is known;
//   * self memory: CPU bytes allocated minus freed by each op itself (the profiler's memory
//     events, given to the innermost op open on their thread at that moment).
// Rows are aggregated by (device, phase, name): count, self and total seconds over all
// profiled steps (divide by `steps` for per step). Total time counts nested calls of the same
// name twice, as torch.profiler's key_averages does; self times add up to the time spent in
// operators.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace scalebench {

/// One event of the profiler, as the worker converts it.
struct ProfiledEvent {
  enum class Kind {
    kOp,      ///< a CPU operator or runtime call (nesting on its thread gives self time)
    kPhase,   ///< a phase scope of the workload (name: the phase)
    kMemory,  ///< a CPU allocation (bytes > 0) or free (bytes < 0) at `start_ns`
    kKernel,  ///< a GPU kernel or copy (device time; `link` = the launching op's correlation)
  };
  Kind kind = Kind::kOp;
  std::string name;
  uint64_t thread = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t bytes = 0;         ///< kMemory only
  uint64_t correlation = 0;  ///< kOp: its correlation id (0: none)
  uint64_t link = 0;         ///< kKernel: the correlation id of the op that launched it
};

/// One row of a rank's operator table.
struct OpRow {
  std::string name;
  std::string phase;   ///< the workload's phase, "" when unknown
  std::string device;  ///< "cpu" (operators) or "cuda" (kernels)
  int64_t count = 0;
  double self_s = 0;
  double total_s = 0;
  double self_cpu_memory_bytes = 0;  ///< net allocated by the op itself; 0 without memory events
  bool operator==(const OpRow&) const = default;
};

/// A rank's profile of one cell.
struct OpProfile {
  int64_t steps = 0;                    ///< profiled steps this rank ran
  std::vector<std::string> activities;  ///< "cpu", and "cuda" on a GPU
  std::vector<OpRow> ops;               ///< self_s descending
  bool operator==(const OpProfile&) const = default;
};

/// Note [Operator profiles]: the table of `events`, rows sorted by self time (descending),
/// then device, phase and name. Pure. Events of kind kPhase only give phases; a kOp whose
/// end precedes its start is treated as zero-length.
std::vector<OpRow> summarize_profile(const std::vector<ProfiledEvent>& events);

nlohmann::json to_json(const OpProfile& profile);
/// Throws nlohmann::json::exception on a malformed value (protocol/wire.cc maps it to InputError).
OpProfile op_profile_from_json(const nlohmann::json& json);

}  // namespace scalebench
