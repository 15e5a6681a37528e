// CUDA caching-allocator peaks for worker/memory_stats.h.
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "worker/memory_stats.h"

namespace scalebench {

namespace {
constexpr size_t kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

/// The caching allocator knows its devices only after CUDA's lazy initialisation (the first
/// CUDA tensor does it); before, its statistics calls fail with "Invalid device argument".
/// A cell resets the peaks before its model reaches the GPU, so initialise here (idempotent).
void init_cuda() { at::globalContext().lazyInitDevice(c10::DeviceType::CUDA); }
}  // namespace

void reset_cuda_peak_memory(int index) {
  init_cuda();
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index));
}

CudaPeaks read_cuda_peak_memory(int index) {
  init_cuda();
  const auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
  return {stats.allocated_bytes[kAggregate].peak, stats.reserved_bytes[kAggregate].peak};
}

void empty_cuda_cache() { c10::cuda::CUDACachingAllocator::emptyCache(); }

double cuda_total_memory_bytes(int index) {
  return static_cast<double>(
      at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index))->totalGlobalMem);
}

}  // namespace scalebench
