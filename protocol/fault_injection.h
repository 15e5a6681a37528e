// A test-only switch that makes one rank fail in one chosen way at one chosen point.
//
// Note [Fault injection]
// ~~~~~~~~~~~~~~~~~~~~~~
// tests/faults/fault_matrix.py proves what a job does when a rank throws, runs out of
// memory, hangs in a collective, exits (0 or 1), aborts, is killed or is sent SIGTERM, at
// each point of a run (below), on the first worker, the last worker and rank 0: the job
// ends within a bounded time with the documented status (docs/reliability.md), no process
// is left behind, and `--resume` yields exactly the matrix's cells.
//
// The switch is SCALEBENCH_FAULT=<kind>:<point>:<world rank>[:<n>] (fire at the n-th time
// that rank reaches that point, default 1). Only a binary whose main() calls
// enable_fault_injection() reads it: the test binary `scalebench_fake` does; the
// `scalebench` users run never does, so the variable in a user's environment does nothing
// and a fault point costs one load of a bool.
//
// Points, in the order a run reaches them:
//   worker:  hello (before it reports), receive (assignment received, before the cell),
//            setup / forward / backward (inside the fake CellRunner's cell; backward in
//            training cells only), result (before the result is sent)
//   rank 0:  start (dispatch loop entered), dispatch (before a cell is sent), write (before
//            a complete cell is stored), finish (loop done, before the workers are shut down)
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace scalebench {

enum class FaultKind { kThrow, kOom, kHang, kExit0, kExit1, kAbort, kSigkill, kSigterm };

struct FaultSpec {
  FaultKind kind = FaultKind::kThrow;
  std::string point;
  int rank = 0;
  int nth = 1;  ///< fire at the nth time `rank` reaches `point`
};

/// Every point name a fault_point() call uses (see the Note).
inline constexpr std::string_view kFaultPoints[] = {"hello",    "receive", "setup", "forward",
                                                    "backward", "result",  "start", "dispatch",
                                                    "write",    "finish"};

/// Parses "<kind>:<point>:<rank>[:<n>]"; throws InputError naming what is wrong.
FaultSpec parse_fault_spec(std::string_view text);

/// Test binaries only: arms the fault described by SCALEBENCH_FAULT, if set (throws
/// InputError for a malformed value). Call once, before MPI work starts.
void enable_fault_injection();

/// Arms `spec` directly (unit tests); nullopt disarms.
void set_fault_for_testing(const std::optional<FaultSpec>& spec);

/// A point of the run. Does nothing unless a fault is armed for this point and rank and
/// this is its nth hit; then prints one line to stderr ("scalebench-fault: ...") and:
/// throw -> CellError (phase named by the point where it is a FailurePhase, else worker);
/// oom -> OutOfMemoryError; hang -> blocks forever in MPI_Barrier(MPI_COMM_WORLD), which
/// no other rank enters; exit0/exit1 -> std::exit; abort -> std::abort; sigkill/sigterm ->
/// raise() (SIGTERM returns: the process's disposition decides, as for a real signal).
void fault_point(std::string_view point, int world_rank);

}  // namespace scalebench
