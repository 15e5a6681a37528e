// Peak bytes of LibTorch's CPU tensors: the CPU counterpart of the CUDA caching allocator's
// peak, for memory budgets (batch_size auto, memory_limit_mb).
//
// Note [Counting CPU allocations]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A process's peak resident set depends on its history: glibc keeps freed heap pages that
// malloc_trim cannot return (fragmentation), and oneDNN caches primitives and scratchpads for
// every shape the process has run, so the same batch peaks higher after a batch search than
// in a fresh process (measured: 661 MiB against 588 MiB for a ResNet-18 step). A budget
// judged by it would find a different boundary each time. So cells with a budget count the
// bytes of LibTorch's CPU allocations instead: a wrapper around the CPU allocator
// (c10::SetCPUAllocator), installed on first use, records the size of each allocation made
// while counting is on and subtracts it when that allocation is freed; the peak is exact and
// the same in every process, like `peak_allocated_bytes` on a GPU. It counts tensors only
// (not libraries, caches or the Python-free rest of the process): `peak_rss_bytes` stays the
// figure of the whole process.
//
// Allocations made while counting is off keep the wrapper's deleter (an allocator's raw
// deleter must be one function) and cost one lookup in the table when freed. The wrapper is
// never installed in a process that runs no cell with a budget.
#pragma once

#include <cstdint>

namespace scalebench {

/// Starts counting (installing the wrapper on first use) and resets the peak to the bytes
/// currently counted (0 when nothing counted is alive).
void start_counting_cpu_allocations();
/// Stops counting; allocations counted before are still subtracted when freed.
void stop_counting_cpu_allocations();
/// Largest number of counted bytes alive at once since start_counting_cpu_allocations().
int64_t peak_counted_cpu_bytes();
/// Counted bytes alive now.
int64_t current_counted_cpu_bytes();
/// Whether counting is on.
bool counting_cpu_allocations();

}  // namespace scalebench
