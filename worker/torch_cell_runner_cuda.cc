// CUDA device description for worker/torch_cell_runner.cc.
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDAFunctions.h>

#include <array>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "worker/device_selection.h"

namespace scalebench {

std::string cuda_device_name(int index) {
  return at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index))->name;
}

std::pair<int, int> cuda_compute_capability(int index) {
  const auto* properties = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  return {properties->major, properties->minor};
}

std::map<std::string, double> cuda_device_metrics(int index) {
  const auto* properties = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  std::map<std::string, double> metrics;
  metrics["gpu_memory_bytes"] = static_cast<double>(properties->totalGlobalMem);
  metrics["gpu_multiprocessors"] = properties->multiProcessorCount;
  metrics["gpu_compute_capability"] = properties->major + properties->minor / 10.0;
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) metrics["cuda_driver_version"] = driver;
  metrics["cudnn_version"] = at::globalContext().hasCuDNN()
                                 ? static_cast<double>(at::detail::getCUDAHooks().versionCuDNN())
                                 : 0.0;
  return metrics;
}

std::string cuda_pci_bus_id(int index) {
  const auto* properties = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  std::array<char, 32> text{};
  std::snprintf(
      text.data(), text.size(), "%08X:%02X:%02X.0", static_cast<unsigned>(properties->pciDomainID),
      static_cast<unsigned>(properties->pciBusID), static_cast<unsigned>(properties->pciDeviceID));
  return text.data();
}

void set_current_cuda_device(int index) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
}

}  // namespace scalebench
