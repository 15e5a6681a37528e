#include "worker/compiled_twin.h"

#include <fstream>

#include "common/base/error.h"
#include "common/cell/messages.h"
#include "worker/aoti_model.h"
#include "worker/checkpoint.h"
#include "worker/scripted_model.h"
#include "worker/workload.h"

namespace scalebench {

bool runs_aoti_package(const CellSpec& cell) {
  return !cell.model.aoti.empty() || cell.compile == "aoti";
}

ModelInfo compiled_twin_info(const CellSpec& cell, std::string artifact) {
  ModelInfo info = find_model(cell.model.zoo);
  const std::string source = cell.compile + " twin of zoo model " + cell.model.zoo;
  if (artifact.empty()) {
    throw CellError(FailurePhase::kModelInit,
                    source +
                        ": the assignment carries no bytes (rank 0 exports the twin at "
                        "prepare time and sends it with the cell)");
  }
  if (cell.compile == "torchscript") {
    info.build = [bytes = std::move(artifact), source](
                     const std::vector<int64_t>&, int64_t) -> std::shared_ptr<models::ZooModel> {
      return load_scripted_model(bytes, source);
    };
  } else if (cell.compile == "aoti") {
    CellSpec named = cell;
    named.model.aoti = source;  // how the package's messages name it
    info.build = aoti_model_info(named, std::move(artifact)).build;
  } else {
    throw InputError("compile: '" + cell.compile + "' has no exported twin (torchscript, aoti)");
  }
  info.name = cell.compile + ":" + cell.model.zoo;
  return info;
}

std::shared_ptr<models::ZooModel> eager_zoo_model(const CellSpec& cell, const std::string& tree) {
  CellSpec eager = cell;
  eager.compile = CellSpec{}.compile;
  const ResolvedModel resolved = resolve_model(eager);  // the zoo's entry, shapes checked
  torch::manual_seed(cell.seed);
  auto model = resolved.info->build(resolved.input_shape, resolved.num_classes);
  if (!cell.checkpoint.empty()) {
    load_state_dict(model->state_entries(), resolve_in_tree(tree, cell.checkpoint).string());
  }
  model->eval();
  return model;
}

void write_zoo_state(const CellSpec& cell, const std::string& tree, const std::string& path) {
  const auto model = eager_zoo_model(cell, tree);
  c10::Dict<std::string, at::Tensor> state;
  for (const auto& [name, tensor] : model->state_entries()) state.insert(name, tensor.detach());
  const std::vector<char> bytes = torch::pickle_save(state);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw Error("cannot write the zoo model's state to " + path);
}

}  // namespace scalebench
