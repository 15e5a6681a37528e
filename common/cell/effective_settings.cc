#include "common/cell/effective_settings.h"

#include <utility>

namespace scalebench {
namespace {

std::string capability(const DeviceFacts& facts) {
  return std::to_string(facts.compute_major) + "." + std::to_string(facts.compute_minor);
}

/// Appends the effect of `key`: `works` says whether a requested `true` takes effect, and
/// `why_not` why it does not. A switch that is off is always effective.
void add_switch(std::vector<SettingEffect>& out, const CellSpec& cell, std::string_view key,
                bool works, const std::string& why_not) {
  const SettingDef* setting = find_setting(key);
  const SettingValue requested = setting->get(cell);
  const bool on = std::get<bool>(requested);
  SettingEffect effect{std::string(key), requested, requested, ""};
  if (on && !works) {
    effect.effective = false;
    effect.reason = std::string(key) + ": " + why_not;
  }
  out.push_back(std::move(effect));
}

}  // namespace

std::vector<SettingEffect> effective_settings(const CellSpec& cell, const DeviceFacts& facts) {
  std::vector<SettingEffect> out;
  const bool ampere = facts.cuda && facts.compute_major >= 8;
  const std::string on_cpu = "this cell runs on the CPU";
  add_switch(out, cell, "tf32", ampere,
             facts.cuda ? "TF32 needs an Ampere or newer GPU (compute capability 8.0+); this "
                          "one is " +
                              capability(facts)
                        : "TF32 is a mode of CUDA tensor cores; " + on_cpu);
  add_switch(out, cell, "cudnn_benchmark", facts.cuda && facts.cudnn,
             facts.cuda ? "cuDNN is not available to this build"
                        : "cuDNN acts on CUDA devices "
                          "only; " +
                              on_cpu);
  add_switch(out, cell, "deterministic", true, "");
  add_switch(out, cell, "pinned_memory", facts.cuda,
             "pinned memory speeds up copies to a GPU; " + on_cpu);
  // An AOTInductor package runs the kernels compiled at export: layout, precision and graph
  // capture were decided then (docs/own-model.md#aotinductor-packages).
  const bool aoti = !cell.model.aoti.empty() || cell.compile == "aoti";
  add_switch(out, cell, "cuda_graphs", facts.cuda && !aoti,
             aoti ? "an AOTInductor package runs its own compiled kernels; capture them at "
                    "export (torch._inductor config triton.cudagraphs)"
                  : "CUDA graphs capture GPU kernels; " + on_cpu + ", so the forward runs eagerly");
  add_switch(out, cell, "channels_last",
             (facts.sample_rank == 3 || facts.sample_rank == 4) && !aoti,
             aoti ? "an AOTInductor package's kernels are compiled for the layout it was "
                    "exported with; export a channels-last twin to compare layouts"
                  : "channels-last is a layout of image tensors (one sample C,H,W or C,D,H,W); "
                    "this model's samples have rank " +
                        std::to_string(facts.sample_rank));

  const SettingValue asked = find_setting("precision")->get(cell);
  SettingEffect precision{"precision", asked, asked, ""};
  if (aoti && cell.precision != Precision::kFp32) {
    precision.effective = std::string("fp32");
    precision.reason =
        "precision: an AOTInductor package runs in the dtype it was exported in (autocast "
        "does not reach compiled kernels), so inputs stay fp32; export a " +
        to_string(cell.precision) + " package (model.to(torch." +
        (cell.precision == Precision::kBf16 ? "bfloat16" : "float16") +
        ") before torch.export) as its own experiment";
  } else if (cell.precision == Precision::kBf16 && facts.cuda && facts.compute_major < 8) {
    precision.effective = std::string("fp32");
    precision.reason =
        "precision: bf16 needs a GPU with bf16 (compute capability 8.0+); this "
        "one is " +
        capability(facts) + ", so the cell runs in fp32";
  }
  out.push_back(std::move(precision));

  if (cell.mode == Mode::kTrain) {
    add_switch(out, cell, "optimizer.fused", false,
               "not available in this build: LibTorch's C++ optimizers have no fused step, so "
               "the standard one runs");
  }
  return out;
}

CellSpec with_effective_settings(CellSpec cell, const std::vector<SettingEffect>& effects) {
  for (const auto& effect : effects) {
    if (const SettingDef* setting = find_setting(effect.key)) setting->set(cell, effect.effective);
  }
  return cell;
}

}  // namespace scalebench
