// Model FLOPs utilisation (MFU) of a stored cell, as the analysis defines and computes it
// (analysis/scalebench_analysis/tables/mfu.py, docs/metrics.md#mfu): model FLOPs per sample
// (the rank metric train_flops_per_sample for training, flops_per_sample for inference) times
// the cell's throughput, over the dense peak of the cell's GPU at the precision it ran, times
// the world size. The peaks come from the analysis's own table (peak_flops.json, compiled
// in), matched by the longest device key the GPU's name contains. Never guessed: no peak on
// a CPU or an unknown device, no row without FLOPs.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace scalebench {

/// The text of analysis/scalebench_analysis/data/peak_flops.json (generated source).
const char* shipped_peak_flops_json();

/// The peak FLOP/s of one device named `device` (CUDA's name, e.g. "NVIDIA H200") at
/// `precision` (fp32, tf32, bf16, fp16); nullopt when the table does not know it.
std::optional<double> peak_flops(const std::string& device, const std::string& precision);

/// bf16 / fp16 as the cell ran (its effective precision), tf32 for an fp32 cell whose
/// effective tf32 is true, else fp32. `effective`: {"precision": ..., "tf32": ...} as took
/// effect ("" where not recorded: the spec's precision then).
std::string precision_used(const nlohmann::json& spec, const nlohmann::json& effective);

struct CellFlops {
  std::string device;          ///< the first rank's device name
  std::string precision_used;  ///< precision_used()
  double flops_per_sample = 0.0;
  double achieved_flops = 0.0;       ///< flops_per_sample x throughput (samples/s, all ranks)
  std::optional<double> peak_flops;  ///< the device's peak x world size; nullopt: unknown
  std::optional<double> mfu;         ///< achieved / peak
};

/// The figures of one cell of read_results_overview (its `model_flops`, `device_name`,
/// `spec`, `effective_precision` / `effective_tf32` and summary throughput); nullopt when the cell
/// has no FLOPs or no throughput (a failed cell, a TorchScript model).
std::optional<CellFlops> cell_flops(const nlohmann::json& cell);

}  // namespace scalebench
