#include "worker/memory_stats.h"

#include <malloc.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "common/base/process_memory.h"
#include "worker/cpu_allocation_counter.h"

namespace scalebench {

std::optional<int64_t> parse_vmhwm_bytes(std::string_view status_text) {
  constexpr std::string_view kKey = "VmHWM:";
  size_t at = 0;
  while (at < status_text.size()) {
    const size_t line_end = std::min(status_text.find('\n', at), status_text.size());
    std::string_view line = status_text.substr(at, line_end - at);
    at = line_end + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    int64_t kib = 0;
    const auto [rest, error] = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (error != std::errc() || kib < 0) return std::nullopt;
    if (std::string_view(rest, line.data() + line.size()).find("kB") == std::string_view::npos) {
      return std::nullopt;
    }
    return kib * 1024;
  }
  return std::nullopt;
}

std::optional<int64_t> read_peak_rss_bytes(const std::string& status_path) {
  std::ifstream in(status_path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_vmhwm_bytes(text.str());
}

bool reset_peak_rss(const std::string& clear_refs_path) {
  std::ofstream out(clear_refs_path);
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

bool is_oom_text(const std::string& text) {
  return text.find("out of memory") != std::string::npos ||
         text.find("can't allocate memory") != std::string::npos;
}

void release_cached_memory(const torch::Device& device) {
#ifdef SCALEBENCH_HAVE_CUDA
  if (device.is_cuda()) empty_cuda_cache();
#else
  (void)device;
#endif
  malloc_trim(0);
}

double memory_budget_bytes(double memory_limit_mb, const torch::Device& device, int node_workers,
                           bool for_search) {
  if (memory_limit_mb > 0) return memory_limit_mb * 1024.0 * 1024.0;
  if (!for_search) return 0;
#ifdef SCALEBENCH_HAVE_CUDA
  if (device.is_cuda()) return cuda_total_memory_bytes(device.index());
#else
  (void)device;
#endif
  return available_memory_share_bytes(node_workers);
}

double budgeted_peak_bytes(const std::map<std::string, double>& metrics,
                           const torch::Device& device) {
  (void)device;
  // GPU, and CPU cells with a budget (Note [Counting CPU allocations]): the allocator's peak.
  for (const char* name : {"peak_allocated_bytes", "peak_rss_bytes"}) {
    const auto it = metrics.find(name);
    if (it != metrics.end()) return it->second;
  }
  return 0;
}

bool reset_peak_memory(const torch::Device& device) {
  if (counting_cpu_allocations()) start_counting_cpu_allocations();  // the peak restarts
#ifdef SCALEBENCH_HAVE_CUDA
  if (device.is_cuda()) reset_cuda_peak_memory(device.index());
#else
  (void)device;
#endif
  return reset_peak_rss();
}

std::map<std::string, double> peak_memory_metrics(const torch::Device& device, bool rss_was_reset) {
  std::map<std::string, double> metrics;
  if (const auto rss = read_peak_rss_bytes()) {
    metrics["peak_rss_bytes"] = static_cast<double>(*rss);
  }
  metrics["peak_rss_reset"] = rss_was_reset ? 1.0 : 0.0;
  if (!device.is_cuda() && counting_cpu_allocations()) {  // Note [Counting CPU allocations]
    metrics["peak_allocated_bytes"] = static_cast<double>(peak_counted_cpu_bytes());
  }
#ifdef SCALEBENCH_HAVE_CUDA
  if (device.is_cuda()) {
    const CudaPeaks peaks = read_cuda_peak_memory(device.index());
    metrics["peak_allocated_bytes"] = static_cast<double>(peaks.allocated_bytes);
    metrics["peak_reserved_bytes"] = static_cast<double>(peaks.reserved_bytes);
  }
#else
  (void)device;
#endif
  return metrics;
}

}  // namespace scalebench
