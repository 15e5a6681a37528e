#include "protocol/fault_injection.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "common/base/decimal.h"
#include "common/base/error.h"
#include "common/cell/cell_outcome.h"

namespace scalebench {
namespace {

constexpr std::array<std::pair<std::string_view, FaultKind>, 8> kKinds{{
    {"throw", FaultKind::kThrow},
    {"oom", FaultKind::kOom},
    {"hang", FaultKind::kHang},
    {"exit0", FaultKind::kExit0},
    {"exit1", FaultKind::kExit1},
    {"abort", FaultKind::kAbort},
    {"sigkill", FaultKind::kSigkill},
    {"sigterm", FaultKind::kSigterm},
}};

/// The armed fault and its hit count. Written before the run's threads start (or by a
/// single-threaded unit test), read by the rank's main thread only.
struct Armed {
  bool active = false;
  FaultSpec spec;
  int hits = 0;
};

Armed& armed() {
  static Armed state;
  return state;
}

std::string_view kind_name(FaultKind kind) {
  for (const auto& [name, value] : kKinds) {
    if (value == kind) return name;
  }
  return "?";
}

int parse_count(std::string_view text, std::string_view what, int minimum) {
  const auto value = parse_decimal(text);
  if (!value || *value > 999999) {
    throw InputError("SCALEBENCH_FAULT: " + std::string(what) + " '" + std::string(text) +
                     "' is not a number");
  }
  if (*value < minimum) {
    throw InputError("SCALEBENCH_FAULT: " + std::string(what) + " must be at least " +
                     std::to_string(minimum));
  }
  return static_cast<int>(*value);
}

/// One line on stderr, with write(2): the process may die right after.
void announce(const FaultSpec& spec) {
  const std::string line = "scalebench-fault: " + std::string(kind_name(spec.kind)) + " at " +
                           spec.point + " on rank " + std::to_string(spec.rank) + " (hit " +
                           std::to_string(spec.nth) + ")\n";
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

[[noreturn]] void hang_in_collective() {
  for (;;) MPI_Barrier(MPI_COMM_WORLD);  // no other rank enters it: blocks for good
}

}  // namespace

FaultSpec parse_fault_spec(std::string_view text) {
  std::vector<std::string_view> fields;
  size_t begin = 0;
  for (;;) {
    const size_t colon = text.find(':', begin);
    fields.push_back(
        text.substr(begin, colon == std::string_view::npos ? text.npos : colon - begin));
    if (colon == std::string_view::npos) break;
    begin = colon + 1;
  }
  if (fields.size() < 3 || fields.size() > 4) {
    throw InputError("SCALEBENCH_FAULT '" + std::string(text) +
                     "': expected <kind>:<point>:<rank>[:<n>]");
  }
  FaultSpec spec;
  const auto kind = std::find_if(kKinds.begin(), kKinds.end(),
                                 [&](const auto& entry) { return entry.first == fields[0]; });
  if (kind == kKinds.end()) {
    throw InputError("SCALEBENCH_FAULT: unknown kind '" + std::string(fields[0]) +
                     "' (throw, oom, hang, exit0, exit1, abort, sigkill, sigterm)");
  }
  spec.kind = kind->second;
  if (std::find(std::begin(kFaultPoints), std::end(kFaultPoints), fields[1]) ==
      std::end(kFaultPoints)) {
    throw InputError("SCALEBENCH_FAULT: unknown point '" + std::string(fields[1]) +
                     "' (see protocol/fault_injection.h)");
  }
  spec.point = std::string(fields[1]);
  spec.rank = parse_count(fields[2], "rank", 0);
  if (fields.size() == 4) spec.nth = parse_count(fields[3], "n", 1);
  return spec;
}

void enable_fault_injection() {
  const char* text = std::getenv("SCALEBENCH_FAULT");
  if (text == nullptr || *text == '\0') return;
  set_fault_for_testing(parse_fault_spec(text));
}

void set_fault_for_testing(const std::optional<FaultSpec>& spec) {
  Armed& state = armed();
  state.active = spec.has_value();
  state.spec = spec.value_or(FaultSpec{});
  state.hits = 0;
}

void fault_point(std::string_view point, int world_rank) {
  Armed& state = armed();
  if (!state.active || state.spec.rank != world_rank || state.spec.point != point) return;
  if (++state.hits != state.spec.nth) return;
  announce(state.spec);
  const std::string what = "injected fault at " + std::string(point);
  switch (state.spec.kind) {
    case FaultKind::kThrow:
      throw CellError(parse_failure_phase(std::string(point)).value_or(FailurePhase::kWorker),
                      what);
    case FaultKind::kOom:
      throw OutOfMemoryError(
          parse_failure_phase(std::string(point)).value_or(FailurePhase::kWorker),
          what + ": out of memory");
    case FaultKind::kHang:
      hang_in_collective();
    case FaultKind::kExit0:
      std::exit(0);  // NOLINT(concurrency-mt-unsafe): the point is to exit like a bad rank
    case FaultKind::kExit1:
      std::exit(1);  // NOLINT(concurrency-mt-unsafe)
    case FaultKind::kAbort:
      std::abort();
    case FaultKind::kSigkill:
      (void)std::raise(SIGKILL);
      break;
    case FaultKind::kSigterm:
      (void)std::raise(SIGTERM);
      break;
  }
}

}  // namespace scalebench
