#include "worker/checkpoint.h"

#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "common/base/error.h"

namespace scalebench {
namespace models {

NamedState named_state(torch::nn::Module& module) {
  NamedState entries;
  for (const auto& item : module.named_parameters()) entries.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers()) entries.emplace_back(item.key(), item.value());
  return entries;
}

}  // namespace models

namespace {

std::vector<char> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CellError(FailurePhase::kCheckpointLoad, "cannot open checkpoint " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

void load_state_dict(const models::NamedState& targets, const std::string& path) {
  torch::IValue loaded;
  try {
    loaded = torch::pickle_load(read_file_bytes(path));
  } catch (const c10::Error& error) {
    throw CellError(
        FailurePhase::kCheckpointLoad,
        "checkpoint " + path + " is not a torch.save file: " + error.what_without_backtrace());
  }
  if (!loaded.isGenericDict()) {
    throw CellError(FailurePhase::kCheckpointLoad,
                    "checkpoint " + path +
                        " does not hold a dict of tensors: save it with "
                        "torch.save(dict(model.state_dict()), path)");
  }
  std::map<std::string, torch::Tensor> entries;
  for (const auto& item : loaded.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor()) {
      throw CellError(FailurePhase::kCheckpointLoad,
                      "checkpoint " + path + " has a non name->tensor entry");
    }
    entries.emplace(item.key().toStringRef(), item.value().toTensor());
  }
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  auto assign = [&](const std::string& name, const torch::Tensor& target) {
    const auto found = entries.find(name);
    if (found == entries.end()) {
      throw CellError(FailurePhase::kCheckpointLoad,
                      "checkpoint " + path + " has no entry " + name);
    }
    if (found->second.sizes() != target.sizes()) {
      throw CellError(FailurePhase::kCheckpointLoad,
                      "checkpoint " + path + " entry " + name + " has shape " +
                          c10::str(found->second.sizes()) + ", the model needs " +
                          c10::str(target.sizes()));
    }
    target.copy_(found->second);
    used.insert(name);
  };
  for (const auto& [name, target] : targets) assign(name, target);
  for (const auto& [name, tensor] : entries) {
    if (!used.contains(name)) {
      throw CellError(FailurePhase::kCheckpointLoad, "checkpoint " + path + " has an entry " +
                                                         name + " that the model does not have");
    }
  }
}

}  // namespace scalebench
