// Checkpoints of inference cells: a state dict saved from Python or C++, or a Lightning
// checkpoint, loaded into a model's state by name before the timed loop (its wall time is metric
// checkpoint_load_s).
#pragma once

#include <string>

#include "worker/models/zoo_model.h"

namespace scalebench {

/// Copies the tensors of the checkpoint at `path` into `targets`, matched by name. The
/// file is a torch.save zip file of a state dict (torch.save(model.state_dict(), path), a
/// dict, or torch::pickle_save of a name -> tensor dict in C++) or a Lightning `.ckpt`
/// (its `state_dict` entry); nothing in it is executed. Names match as they are, or after
/// the prefix rule of Note [Checkpoint formats and the prefix rule] (checkpoint.cc);
/// shapes must match exactly (dtype is converted). Only the matched tensors are read.
/// Throws CellError(FailurePhase::kCheckpointLoad) naming the file and the first
/// unreadable, missing, unexpected or mis-shaped entry, and what to do.
void load_state_dict(const models::NamedState& targets, const std::string& path);

}  // namespace scalebench
