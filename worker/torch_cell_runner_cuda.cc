// CUDA device description for worker/torch_cell_runner.cc.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>

#include <string>

namespace scalebench {

std::string cuda_device_name(int index) {
  return at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index))->name;
}

void set_current_cuda_device(int index) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
}

}  // namespace scalebench
