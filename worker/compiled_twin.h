// The compile axis on the workers: a zoo model run as the TorchScript or AOTInductor twin
// that rank 0 exported from the eager model's weights (Note [Compiled twins] in
// orchestrator/compiled_twins.h), and the eager model those twins are made from and
// validated against.
#pragma once

#include <memory>
#include <string>

#include "common/cell/cell_spec.h"
#include "worker/model_zoo.h"

namespace scalebench {

/// True when `cell` runs an AOTInductor package: `model: {aoti: ...}` or `compile: aoti`.
/// Such a model has no parameters of its own (its weights are compiled in).
bool runs_aoti_package(const CellSpec& cell);

/// The ModelInfo of a `compile: torchscript|aoti` cell: the zoo entry of cell.model.zoo
/// (default shapes, checks, samples, input dtype, analytic FLOPs: as its eager cells) whose
/// `build` loads `artifact`, the twin's bytes that rank 0 sent. Throws InputError for a
/// `compile` that is not a twin or an unknown zoo name.
ModelInfo compiled_twin_info(const CellSpec& cell, std::string artifact);

/// The zoo model of `cell` with the weights its `compile: eager` cell runs, on the CPU:
/// built right after torch::manual_seed(cell.seed) (as the inference workload does), then
/// the checkpoint loaded when the cell names one (`tree` as Assignment::tree). Input
/// shape and classes default as the zoo's. Throws as find_model, ModelInfo::check and
/// load_state_dict do.
std::shared_ptr<models::ZooModel> eager_zoo_model(const CellSpec& cell, const std::string& tree);

/// Writes eager_zoo_model(cell, tree)'s state (parameters then buffers, by name) to `path`
/// as a name -> tensor dict with torch::pickle_save, which Python's torch.load reads: what
/// `python -m scalebench_client.export --zoo` loads into the Python twin. Throws Error when
/// the file cannot be written.
void write_zoo_state(const CellSpec& cell, const std::string& tree, const std::string& path);

}  // namespace scalebench
