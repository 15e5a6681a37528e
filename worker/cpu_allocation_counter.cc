#include "worker/cpu_allocation_counter.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

namespace scalebench {
namespace {

/// Note [Counting CPU allocations]. One instance per process, never destroyed (tensors may
/// be freed during static destruction).
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base)
      : base_(base), base_deleter_(base->raw_deleter()) {}

  c10::DataPtr allocate(size_t bytes) override {
    c10::DataPtr original = base_->allocate(bytes);
    void* data = original.get();
    if (data == nullptr) return original;
    if (counting_.load(std::memory_order_relaxed)) {
      const std::lock_guard lock(mutex_);
      sizes_[data] = bytes;
      current_ += static_cast<int64_t>(bytes);
      peak_ = std::max(peak_, current_);
    }
    // The base allocator's context is the data pointer itself (it has a raw deleter), so
    // handing the same pointer to our deleter keeps the raw interface valid.
    original.release_context();
    return {data, data, &CountingCpuAllocator::release, original.device()};
  }

  [[nodiscard]] c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  void start() {
    const std::lock_guard lock(mutex_);
    peak_ = current_;
    counting_ = true;
  }
  void stop() { counting_ = false; }
  int64_t peak() {
    const std::lock_guard lock(mutex_);
    return peak_;
  }
  int64_t current() {
    const std::lock_guard lock(mutex_);
    return current_;
  }
  bool counting() const { return counting_; }

  static CountingCpuAllocator* instance;

 private:
  static void release(void* data) {
    CountingCpuAllocator& self = *instance;
    {
      const std::lock_guard lock(self.mutex_);
      const auto found = self.sizes_.find(data);
      if (found != self.sizes_.end()) {
        self.current_ -= static_cast<int64_t>(found->second);
        self.sizes_.erase(found);
      }
    }
    self.base_deleter_(data);
  }

  c10::Allocator* base_;
  c10::DeleterFnPtr base_deleter_;
  std::atomic<bool> counting_{false};
  std::mutex mutex_;
  std::unordered_map<void*, size_t> sizes_;
  int64_t current_ = 0;
  int64_t peak_ = 0;
};

CountingCpuAllocator* CountingCpuAllocator::instance = nullptr;

CountingCpuAllocator& installed() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::Allocator* base = c10::GetCPUAllocator();
    // Without a raw deleter the base's context may differ from its data: nothing to wrap.
    TORCH_CHECK(base->raw_deleter() != nullptr,
                "scalebench: the CPU allocator has no raw deleter; cannot count its bytes");
    CountingCpuAllocator::instance = new CountingCpuAllocator(base);  // NOLINT: see the class
    // The default CPU allocator is registered with priority 0; an equal priority replaces it.
    c10::SetCPUAllocator(CountingCpuAllocator::instance, /*priority=*/0);
  });
  return *CountingCpuAllocator::instance;
}

}  // namespace

void start_counting_cpu_allocations() { installed().start(); }

void stop_counting_cpu_allocations() {
  if (CountingCpuAllocator::instance != nullptr) CountingCpuAllocator::instance->stop();
}

int64_t peak_counted_cpu_bytes() {
  return CountingCpuAllocator::instance != nullptr ? CountingCpuAllocator::instance->peak() : 0;
}

int64_t current_counted_cpu_bytes() {
  return CountingCpuAllocator::instance != nullptr ? CountingCpuAllocator::instance->current() : 0;
}

bool counting_cpu_allocations() {
  return CountingCpuAllocator::instance != nullptr && CountingCpuAllocator::instance->counting();
}

}  // namespace scalebench
