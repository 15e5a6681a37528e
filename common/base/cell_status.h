// How a cell can end: its status and the phase in which it failed, as enums with their
// stored names. In base/ (not cell/) because error.h's CellError carries them: every library
// may throw one, and none should need the cell's vocabulary for it.
#pragma once

#include <optional>
#include <string>

namespace scalebench {

/// Outcome of a cell (or of one rank's share of it). Stored as lowercase text.
enum class CellStatus { kOk, kFailed, kOom, kTimeout, kRunning, kSkipped, kInterrupted };
std::string to_string(CellStatus status);
std::optional<CellStatus> parse_cell_status(const std::string& text);

/// Where a cell failed. Stored as text (to_string): "" for kNone, else the lowercase name
/// below; docs/user-guide.md#failures lists what each means.
enum class FailurePhase {
  kNone,            ///< the cell did not fail
  kInputs,          ///< rank 0: the cell's files (TorchScript module) could not be sent
  kPrepare,         ///< rank 0: the branch's prepare step failed
  kConnect,         ///< the group communicator (MPI/NCCL) could not be set up
  kDevice,          ///< the requested device is missing or unusable
  kSetup,           ///< per-cell settings of the worker (threads, TF32, memory statistics)
  kModelInit,       ///< building the model, its replica broadcast or the reducer
  kData,            ///< making or reading a batch
  kDataOpen,        ///< opening the cell's HDF5 data
  kCheckpointLoad,  ///< loading the checkpoint
  kTimer,           ///< the phase timers
  kForward,
  kBackward,
  kCommunication,  ///< a collective of the cell
  kLoop,           ///< inside the timed loop, outside the phases above
  kMetrics,        ///< collecting the cell's metrics after the loop
  kValidation,     ///< the accuracy comparison after the loop (validate: true)
  kBatchSearch,    ///< batch_size auto: the probes (Note [Batch search]); none fit, or one failed
  kGroup,          ///< another rank of the group failed first (see Note [Group agreement])
  kWorker,         ///< an unexpected error on a worker rank outside the runner's contract
  kFatal,          ///< a FatalError: the group is unusable and the job ends
  kWatchdog,       ///< rank 0's watchdog: no result within timeout_s + grace
  kInterrupted,    ///< a second stop signal ended the job while the cell ran
};
std::string to_string(FailurePhase phase);
/// Parses stored text; std::nullopt for an unknown name (a file from a newer version).
std::optional<FailurePhase> parse_failure_phase(const std::string& text);

}  // namespace scalebench
