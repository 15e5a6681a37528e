#include "worker/device_selection.h"

#include <sched.h>
#include <torch/cuda.h>

#include <filesystem>

#include "common/base/error.h"

namespace scalebench {

torch::Device select_device(Device requested, const WorkerContext& context) {
  const bool have_gpu = torch::cuda::is_available();
  if (requested == Device::kCuda && !have_gpu) {
    throw CellError(FailurePhase::kDevice,
                    "device cuda was requested but no CUDA GPU is visible to rank " +
                        std::to_string(context.world_rank) + " on " + context.host +
                        ": use device cpu or auto, or run on a GPU node");
  }
  if (requested == Device::kCpu || !have_gpu) return torch::kCPU;
  // device_count() is a c10::DeviceIndex (int8_t): a number, not a character.
  // NOLINTNEXTLINE(bugprone-signed-char-misuse)
  const auto count = static_cast<int>(torch::cuda::device_count());
  if (context.local_index >= count) {
    throw CellError(FailurePhase::kDevice, "worker " + std::to_string(context.local_index) +
                                               " on " + context.host + " has no GPU of its own (" +
                                               std::to_string(count) +
                                               " visible): start at most one worker rank per GPU");
  }
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(context.local_index)};
}

std::string describe(const torch::Device& device) {
#ifdef SCALEBENCH_HAVE_CUDA
  if (device.is_cuda()) return cuda_device_name(device.index());
#endif
  return device.str();
}

std::map<std::string, double> device_metrics(const torch::Device& device) {
  std::map<std::string, double> metrics;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  int first = -1;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    metrics["cpu_affinity_cores"] = CPU_COUNT(&allowed);
    for (int cpu = 0; cpu < CPU_SETSIZE && first < 0; ++cpu) {
      if (CPU_ISSET(cpu, &allowed)) first = cpu;
    }
  }
  double node = -1;
  if (first >= 0) {
    std::error_code error;
    const std::filesystem::path cpu_dir = "/sys/devices/system/cpu/cpu" + std::to_string(first);
    for (const auto& entry : std::filesystem::directory_iterator(cpu_dir, error)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("node", 0) == 0 && name.size() > 4 &&
          name.find_first_not_of("0123456789", 4) == std::string::npos) {
        node = std::stod(name.substr(4));
      }
    }
  }
  metrics["numa_node"] = node;
#ifdef SCALEBENCH_HAVE_CUDA
  if (device.is_cuda())
    metrics.merge(cuda_device_metrics(static_cast<unsigned char>(device.index())));
#else
  (void)device;
#endif
  return metrics;
}

void make_current(const torch::Device& device) {
#ifdef SCALEBENCH_HAVE_CUDA
  if (device.is_cuda()) set_current_cuda_device(device.index());
#else
  (void)device;
#endif
}

std::unique_ptr<GpuPower> open_gpu_power(const torch::Device& device) {
#ifdef SCALEBENCH_HAVE_CUDA
  if (device.is_cuda()) return GpuPower::open(cuda_pci_bus_id(device.index()));
#else
  (void)device;
#endif
  return nullptr;
}

}  // namespace scalebench
