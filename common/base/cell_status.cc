#include "common/base/cell_status.h"

#include <array>
#include <utility>

namespace scalebench {
namespace {

constexpr std::array<std::pair<const char*, CellStatus>, 7> kStatuses{{
    {"ok", CellStatus::kOk},
    {"failed", CellStatus::kFailed},
    {"oom", CellStatus::kOom},
    {"timeout", CellStatus::kTimeout},
    {"running", CellStatus::kRunning},
    {"skipped", CellStatus::kSkipped},
    {"interrupted", CellStatus::kInterrupted},
}};

constexpr std::array<std::pair<const char*, FailurePhase>, 23> kPhases{{
    {"", FailurePhase::kNone},
    {"inputs", FailurePhase::kInputs},
    {"prepare", FailurePhase::kPrepare},
    {"connect", FailurePhase::kConnect},
    {"device", FailurePhase::kDevice},
    {"setup", FailurePhase::kSetup},
    {"model_init", FailurePhase::kModelInit},
    {"data", FailurePhase::kData},
    {"data_open", FailurePhase::kDataOpen},
    {"checkpoint_load", FailurePhase::kCheckpointLoad},
    {"timer", FailurePhase::kTimer},
    {"forward", FailurePhase::kForward},
    {"backward", FailurePhase::kBackward},
    {"communication", FailurePhase::kCommunication},
    {"loop", FailurePhase::kLoop},
    {"metrics", FailurePhase::kMetrics},
    {"validation", FailurePhase::kValidation},
    {"batch_search", FailurePhase::kBatchSearch},
    {"group", FailurePhase::kGroup},
    {"worker", FailurePhase::kWorker},
    {"fatal", FailurePhase::kFatal},
    {"watchdog", FailurePhase::kWatchdog},
    {"interrupted", FailurePhase::kInterrupted},
}};

template <typename Enum, size_t N>
std::string name_of(const std::array<std::pair<const char*, Enum>, N>& table, Enum value) {
  for (const auto& [name, candidate] : table) {
    if (candidate == value) return name;
  }
  return "?";
}

template <typename Enum, size_t N>
std::optional<Enum> value_of(const std::array<std::pair<const char*, Enum>, N>& table,
                             const std::string& text) {
  for (const auto& [name, value] : table) {
    if (text == name) return value;
  }
  return std::nullopt;
}

}  // namespace

std::string to_string(CellStatus status) { return name_of(kStatuses, status); }
std::optional<CellStatus> parse_cell_status(const std::string& text) {
  return value_of(kStatuses, text);
}
std::string to_string(FailurePhase phase) { return name_of(kPhases, phase); }
std::optional<FailurePhase> parse_failure_phase(const std::string& text) {
  return value_of(kPhases, text);
}

}  // namespace scalebench
