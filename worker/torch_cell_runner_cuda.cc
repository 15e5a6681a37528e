// CUDA device description for worker/torch_cell_runner.cc.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>

#include <string>
#include <utility>

namespace scalebench {

std::string cuda_device_name(int index) {
  return at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index))->name;
}

std::pair<int, int> cuda_compute_capability(int index) {
  const auto* properties = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  return {properties->major, properties->minor};
}

void set_current_cuda_device(int index) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
}

}  // namespace scalebench
