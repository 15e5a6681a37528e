#include "worker/device_selection.h"

#include <torch/cuda.h>

#include "common/error.h"

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

void make_current(const torch::Device& device) {
#ifdef SCALEBENCH_HAVE_CUDA
  if (device.is_cuda()) set_current_cuda_device(device.index());
#else
  (void)device;
#endif
}

}  // namespace scalebench
