#include "worker/checkpoint.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "common/base/error.h"
#include "worker/torch_save_reader.h"

namespace scalebench {
namespace models {

NamedState named_state(torch::nn::Module& module) {
  NamedState entries;
  for (const auto& item : module.named_parameters()) entries.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers()) entries.emplace_back(item.key(), item.value());
  return entries;
}

}  // namespace models

// Note [Checkpoint formats and the prefix rule]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The file is read by torch_save::TorchSaveFile (Note [Reading torch.save files without
// Python]), so these load: torch.save(model.state_dict()) (an OrderedDict),
// torch.save(dict(model.state_dict())), torch::pickle_save of a name -> tensor dict, and a
// Lightning `.ckpt`, whose top-level dict has a `state_dict` dict (used; optimizer_states,
// hyper_parameters, callbacks... are never read, whatever classes they pickle).
//
// Lightning names the entries by the LightningModule's attribute (`model.encoder.weight`)
// while the benchmarked module is the attribute itself (`encoder.weight`). The rule: when
// no entry of the model is a checkpoint key as it is, and every checkpoint key starts with
// the same `<name>.` (or `<a>.<b>.`, ...), the shortest such prefix after whose removal
// every entry of the model is found is removed from every key. It applies only when
// nothing matches as is, and removing a prefix that all keys share cannot make two keys
// one, so it never picks a wrong tensor; entries left unmatched are still errors. A module
// whose checkpoint mixes prefixes (`model.` and `ema.`) is converted with
// `python -m scalebench_client.export --checkpoint-prefix` instead. An explicit
// `checkpoint_prefix` matrix key was rejected: the rule covers Lightning's case with no
// setting, and a mistaken one could only turn a match into an error.

namespace {

[[noreturn]] void throw_checkpoint_error(const std::string& path, const std::string& what) {
  throw CellError(FailurePhase::kCheckpointLoad, "checkpoint " + path + " " + what);
}

constexpr const char* kSaveAdvice =
    "save it with torch.save(model.state_dict(), path), or convert a checkpoint with python -m "
    "scalebench_client.export";

/// The dotted prefixes that every key shares, shortest first ("model.", "model.net.").
std::vector<std::string> common_prefixes(
    const std::map<std::string, torch_save::TensorRef>& entries) {
  std::vector<std::string> prefixes;
  if (entries.empty()) return prefixes;
  const std::string& first = entries.begin()->first;
  for (size_t dot = first.find('.'); dot != std::string::npos; dot = first.find('.', dot + 1)) {
    const std::string prefix = first.substr(0, dot + 1);
    for (const auto& [name, ref] : entries) {
      if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return prefixes;
    }
    prefixes.push_back(prefix);
  }
  return prefixes;
}

/// The prefix of Note [Checkpoint formats and the prefix rule], or "" for none.
std::string prefix_to_strip(const models::NamedState& targets,
                            const std::map<std::string, torch_save::TensorRef>& entries) {
  for (const auto& [name, target] : targets) {
    if (entries.contains(name)) return "";
  }
  for (const auto& prefix : common_prefixes(entries)) {
    const bool all_found = std::all_of(targets.begin(), targets.end(), [&](const auto& target) {
      return entries.contains(prefix + target.first);
    });
    if (all_found) return prefix;
  }
  return "";
}

}  // namespace

void load_state_dict(const models::NamedState& targets, const std::string& path) {
  std::unique_ptr<torch_save::TorchSaveFile> file;
  try {
    file = std::make_unique<torch_save::TorchSaveFile>(path);
  } catch (const torch_save::TorchSaveError& error) {
    throw_checkpoint_error(path,
                           "cannot be read: " + std::string(error.what()) + "; " + kSaveAdvice);
  }
  auto state = file->root().dict();
  if (!state) {
    throw_checkpoint_error(
        path, "holds a " + file->root().describe() + ", not a dict of tensors; " + kSaveAdvice);
  }
  std::string context;  // what a mismatch message adds about the file
  if (const auto* nested = state->find("state_dict"); nested && nested->dict()) {
    state = nested->dict();
    context = "this is a Lightning checkpoint with " + std::to_string(state->items.size()) +
              " entries under state_dict";
  }
  const bool has_tensors = std::any_of(
      state->items.begin(), state->items.end(),
      [](const auto& item) { return item.second.template is<torch_save::TensorRef>(); });
  if (!has_tensors) {
    throw_checkpoint_error(
        path,
        "holds a dict without tensors (neither a state dict nor a Lightning checkpoint "
        "with a state_dict); " +
            std::string(kSaveAdvice));
  }
  // " (<context>)" for the messages before the prefix is known.
  const auto noted = [&context] { return context.empty() ? context : " (" + context + ")"; };
  std::map<std::string, torch_save::TensorRef> entries;
  for (const auto& [key, value] : state->items) {
    const auto* name = std::get_if<std::string>(&key);
    if (!name)
      throw_checkpoint_error(path, "has an integer key, not a name" + noted() + "; " + kSaveAdvice);
    if (!value.is<torch_save::TensorRef>()) {
      throw_checkpoint_error(path, "entry " + *name + " is a " + value.describe() +
                                       ", not a tensor" + noted() + "; " + kSaveAdvice);
    }
    // A key set twice keeps its last value, as Python's dict does.
    entries.insert_or_assign(*name, value.as<torch_save::TensorRef>());
  }
  if (state->other_keys > 0) throw_checkpoint_error(path, "has keys that are not names" + noted());
  const std::string prefix = prefix_to_strip(targets, entries);
  if (!prefix.empty()) {
    context += (context.empty() ? "" : "; ") + ("prefix " + prefix + " removed from every key");
  }
  if (!context.empty()) context = " (" + context + ")";

  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  for (const auto& [name, target] : targets) {
    const auto found = entries.find(prefix + name);
    if (found == entries.end()) {
      throw_checkpoint_error(path, "has no entry " + name + context + "; its first key is " +
                                       entries.begin()->first + ", the model's is " +
                                       targets.front().first);
    }
    const auto& ref = found->second;
    if (c10::IntArrayRef(ref.size) != target.sizes()) {
      throw_checkpoint_error(path, "entry " + found->first + " has shape " +
                                       c10::str(c10::IntArrayRef(ref.size)) + ", the model needs " +
                                       c10::str(target.sizes()) + context);
    }
    try {
      target.copy_(file->read(ref));
    } catch (const torch_save::TorchSaveError& error) {
      throw_checkpoint_error(path, "entry " + found->first + " cannot be read: " + error.what());
    }
    used.insert(found->first);
  }
  for (const auto& [name, ref] : entries) {
    if (!used.contains(name)) {
      throw_checkpoint_error(path,
                             "has an entry " + name + " that the model does not have" + context);
    }
  }
}

}  // namespace scalebench
