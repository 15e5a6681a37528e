// What a cell asked for and what took effect on its device (issue 12).
//
// Note [Requested vs effective]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A switch may not act where a cell runs: TF32 needs an Ampere or newer GPU, cuDNN
// switches and pinned memory need a CUDA device, bf16 needs a GPU with bf16, channels-last
// needs image tensors, and LibTorch's C++ optimizers have no fused step. A cell never
// silently measures something other than its label says: the worker decides here, from
// the facts of its device, what takes effect, applies only that, and the results file
// stores `effective_<key>` for every such switch and `ineffective_reasons` (one sentence
// per switch that did not take effect). Pure, so the rules are unit tested without Torch
// or a GPU; worker/torch_cell_runner.cc gathers the facts.
#pragma once

#include <string>
#include <vector>

#include "common/cell/cell_spec.h"
#include "common/cell/settings.h"

namespace scalebench {

/// What the worker knows about where the cell runs.
struct DeviceFacts {
  bool cuda = false;      ///< the cell runs on a CUDA device
  int compute_major = 0;  ///< CUDA compute capability (0 on CPU)
  int compute_minor = 0;
  bool cudnn = false;      ///< cuDNN is available to this build on that device
  size_t sample_rank = 0;  ///< rank of one sample's input (3 for C,H,W), 0 = unknown
};

struct SettingEffect {
  std::string key;         ///< the setting's key (settings table)
  SettingValue requested;  ///< what the cell asked for
  SettingValue effective;  ///< what the worker applies
  std::string reason;      ///< why they differ ("" when they do not)
};

/// The switches that depend on the device, in the settings table's order: tf32,
/// cudnn_benchmark, deterministic, pinned_memory, cuda_graphs, channels_last, precision,
/// optimizer.fused (training cells only). Pure.
std::vector<SettingEffect> effective_settings(const CellSpec& cell, const DeviceFacts& facts);

/// `cell` with every switch of `effects` set to its effective value.
CellSpec with_effective_settings(CellSpec cell, const std::vector<SettingEffect>& effects);

}  // namespace scalebench
