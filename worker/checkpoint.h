// Checkpoints of inference cells: a state_dict saved from Python or C++, loaded into a
// model's state by name before the timed loop (its wall time is metric checkpoint_load_s).
#pragma once

#include <string>

#include "worker/models/zoo_model.h"

namespace scalebench {

/// Copies the tensors of the checkpoint at `path` into `targets`, matched by name. The
/// file is one written by torch.save(dict(model.state_dict()), path) in Python or
/// torch::pickle_save of a name -> tensor dict in C++; its names and shapes must match
/// `targets` exactly (dtype is converted). Throws CellError(FailurePhase::kCheckpointLoad) naming
/// the file and the first missing, unexpected or mis-shaped entry.
void load_state_dict(const models::NamedState& targets, const std::string& path);

}  // namespace scalebench
