// An AOTInductor package (torch._inductor.aoti_compile_and_package of a torch.export'ed
// module: a .pt2 archive with the compiled kernels and the weights) as an inference model,
// loaded through LibTorch's torch::inductor::AOTIModelPackageLoader. docs/own-model.md.
//
// Contract: the exported forward takes one tensor (the batch, [B, input_shape...]) and
// returns one tensor or a sequence whose first element is the output. The package was
// compiled for one device (its metadata AOTI_DEVICE_KEY); the cell must run there. A batch
// dimension exported as static refuses any other batch: the message names the exported
// shape where the package records it (metadata `scalebench.input_shape`, written by
// `python -m scalebench_client.export`; -1 marks a dynamic dimension).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "common/cell/cell_spec.h"
#include "worker/model_zoo.h"

namespace scalebench {

/// Whether this build's LibTorch has the AOTInductor package loader (2.6 and later).
bool aoti_available();

/// The ModelInfo of an AOTInductor cell: `build` writes `artifact` (the package's bytes) to a
/// private temporary file and loads it; inputs are float32 N(0, 1) with the cell's
/// input_shape. Throws CellError(FailurePhase::kModelInit) from `build` when this LibTorch
/// has no loader or the bytes are not a package it can load.
ModelInfo aoti_model_info(const CellSpec& cell, std::string artifact);

}  // namespace scalebench
