// A GPU's energy counter and clocks, read through NVML loaded at run time.
//
// Note [GPU energy]
// ~~~~~~~~~~~~~~~~~
// NVML (libnvidia-ml.so.1) comes with the NVIDIA driver, not with the CUDA toolkit or the
// torch wheel, and no nvml.h is installed where scalebench builds. So it is opened with
// dlopen on first use, and the few functions called are declared here by their C ABI,
// unchanged since NVML 5 (worker/gpu_power.cc). No driver, no GPU, a GPU without an
// energy counter (before Volta) or a failing call: the figures are absent, never zero.
//
// Energy: nvmlDeviceGetTotalEnergyConsumption (millijoules since the driver loaded) is read
// right after the device synchronize that starts the timed loop and right after the one that
// ends it (worker/workload.cc); the difference is `gpu_energy_j`, the whole GPU's energy over
// `loop_wall_s` (scalebench runs one worker per GPU, but another process on the same GPU is
// counted too). The driver refreshes the counter a few times a second, so a loop shorter
// than about a second gives a coarse figure: compare `gpu_energy_j` with `loop_wall_s`.
// The summary adds `energy_j` (sum over the cell's ranks) and `samples_per_joule`.
//
// Clocks (MHz) are read at the end of the timed loop, while the GPU is still at its working
// clock: SM and memory clock, and the SM clock's maximum; with the power limit (W) they tell
// a throttled GPU from a slow kernel. The GPU is found by PCI bus id, so that
// CUDA_VISIBLE_DEVICES (which renumbers CUDA devices but not NVML's) cannot mix GPUs up.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace scalebench {

class GpuPower {
 public:
  /// The GPU with PCI bus id `pci_bus_id` ("00000000:3B:00.0"), or nullptr when NVML cannot
  /// be loaded or does not know that GPU. Never throws.
  static std::unique_ptr<GpuPower> open(const std::string& pci_bus_id);

  GpuPower(const GpuPower&) = delete;
  GpuPower& operator=(const GpuPower&) = delete;
  ~GpuPower();

  /// Energy since the driver loaded, joules; nullopt when the GPU has no counter.
  [[nodiscard]] std::optional<double> total_energy_j() const;
  /// `gpu_sm_clock_mhz`, `gpu_memory_clock_mhz`, `gpu_max_sm_clock_mhz`,
  /// `gpu_power_limit_w`: those NVML could read.
  [[nodiscard]] std::map<std::string, double> clock_metrics() const;

 private:
  struct Api;
  GpuPower(std::shared_ptr<const Api> api, void* device);
  std::shared_ptr<const Api> api_;
  void* device_;  ///< nvmlDevice_t
};

/// Per-rank metrics of one timed loop: `gpu_energy_j` and `gpu_power_w` (mean power over
/// the loop) from two readings of the counter, and the clock metrics. Empty when `power` is
/// null. `start_j` is total_energy_j() at the loop's start.
std::map<std::string, double> loop_power_metrics(const GpuPower* power,
                                                 std::optional<double> start_j, double loop_wall_s);

}  // namespace scalebench
