// Peak memory of one cell: the CUDA caching allocator's peaks on GPU, the process's peak
// resident set (VmHWM) on CPU. Both are reset when a cell starts.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace scalebench {

/// VmHWM of a /proc/<pid>/status text in bytes; nullopt when the line is missing or bad.
std::optional<int64_t> parse_vmhwm_bytes(std::string_view status_text);

/// Reads VmHWM from `status_path`; nullopt when the file cannot be read or parsed.
std::optional<int64_t> read_peak_rss_bytes(const std::string& status_path = "/proc/self/status");

/// Resets the process's VmHWM to its current RSS by writing "5" to `clear_refs_path`
/// (Linux >= 4.0). Returns false, and changes nothing, when that is not possible (other
/// kernels, no permission): the peak then covers the process's lifetime so far.
bool reset_peak_rss(const std::string& clear_refs_path = "/proc/self/clear_refs");

/// Resets the peak counters of `device` (CUDA: resetPeakStats; every device: the RSS peak).
/// Returns whether the RSS peak could be reset.
bool reset_peak_memory(const torch::Device& device);

/// Whether an error's text says an allocator ran out of memory (CUDA's "out of memory",
/// glibc's "can't allocate memory"): errors LibTorch rethrows without their type.
bool is_oom_text(const std::string& text);

/// Gives memory the process holds but does not use back: on CUDA the caching allocator's
/// free blocks (emptyCache), on every device glibc's free heap pages (malloc_trim). Called
/// between the probes of a batch search and after an out-of-memory error, so that the next
/// peak measures the next probe, not what the last one left cached.
void release_cached_memory(const torch::Device& device);

/// The budget that batch_size auto and memory_limit_mb judge a rank's peak by, bytes:
/// memory_limit_mb when set; else (`for_search` only) the GPU's memory, or on CPU the node's
/// MemAvailable shared by its `node_workers`. 0 = no budget.
double memory_budget_bytes(double memory_limit_mb, const torch::Device& device, int node_workers,
                           bool for_search);

/// The peak that the budget is compared with, from peak_memory_metrics: peak_allocated_bytes
/// (CUDA, and CPU while counting: Note [Counting CPU allocations]), else peak_rss_bytes; 0
/// when unknown.
double budgeted_peak_bytes(const std::map<std::string, double>& metrics,
                           const torch::Device& device);

/// Peaks since the last reset, as metrics: `peak_rss_bytes` (when readable) and, on CUDA,
/// `peak_allocated_bytes`, `peak_reserved_bytes`. Adds `peak_rss_reset` (1/0).
std::map<std::string, double> peak_memory_metrics(const torch::Device& device, bool rss_was_reset);

#ifdef SCALEBENCH_HAVE_CUDA
/// CUDA caching allocator of device `index` (worker/memory_stats_cuda.cc).
void reset_cuda_peak_memory(int index);
struct CudaPeaks {
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
};
CudaPeaks read_cuda_peak_memory(int index);
/// Frees the caching allocator's unused blocks (emptyCache).
void empty_cuda_cache();
/// Total memory of device `index`, bytes.
double cuda_total_memory_bytes(int index);
#endif

}  // namespace scalebench
