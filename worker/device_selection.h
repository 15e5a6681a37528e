// Which device a worker rank uses, shared by the cell runner, the collective probe and the
// self-test: cuda:<local_index> when the request allows CUDA and a GPU is there, else cpu.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "common/cell/cell_spec.h"
#include "protocol/cell_runner.h"
#include "worker/gpu_power.h"

namespace scalebench {

/// The device for `requested` on this rank. Throws CellError(kDevice) for cuda without a
/// GPU, or a worker without a GPU of its own (more worker ranks than GPUs on the node).
torch::Device select_device(Device requested, const WorkerContext& context);

/// "cpu", or the GPU's name.
std::string describe(const torch::Device& device);

/// Makes `device` the calling thread's current CUDA device (nothing for the CPU).
void make_current(const torch::Device& device);

/// The energy counter and clocks of `device` (Note [GPU energy]); nullptr for the CPU or
/// where NVML cannot read the GPU.
std::unique_ptr<GpuPower> open_gpu_power(const torch::Device& device);

/// Where this rank runs, as per-rank metrics (docs/metrics.md): `cpu_affinity_cores` (CPUs
/// the rank may run on), `numa_node` (of the first of them; -1 when unknown) and, on a
/// CUDA device, `gpu_memory_bytes`, `gpu_multiprocessors`, `gpu_compute_capability` (9.0),
/// `cuda_driver_version` (13000) and `cudnn_version` (91000; 0 without cuDNN).
std::map<std::string, double> device_metrics(const torch::Device& device);

#ifdef SCALEBENCH_HAVE_CUDA
/// Name of CUDA device `index` (worker/torch_cell_runner_cuda.cc).
std::string cuda_device_name(int index);
/// PCI bus id of CUDA device `index` as NVML writes it ("00000000:3B:00.0").
std::string cuda_pci_bus_id(int index);
/// Makes `index` this thread's current CUDA device (worker/torch_cell_runner_cuda.cc).
void set_current_cuda_device(int index);
/// Compute capability (major, minor) of CUDA device `index`.
std::pair<int, int> cuda_compute_capability(int index);
/// The GPU part of device_metrics (worker/torch_cell_runner_cuda.cc).
std::map<std::string, double> cuda_device_metrics(int index);
#endif

}  // namespace scalebench
