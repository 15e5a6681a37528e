// CUDA-event PhaseTimer. See Note [Cell timing protocol] in worker/phase_timer.h.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <limits>

#include "worker/cuda_check.h"
#include "worker/phase_timer.h"

namespace scalebench {
namespace {

/// Owns one cudaEvent_t (timing enabled).
class CudaEvent {
 public:
  CudaEvent() { CUDA_CHECK(cudaEventCreate(&event_)); }
  ~CudaEvent() { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  [[nodiscard]] cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class CudaEventPhaseTimer : public PhaseTimer {
 public:
  CudaEventPhaseTimer(int device_index, size_t phases, size_t max_iterations)
      : PhaseTimer(phases, max_iterations),
        device_index_(static_cast<c10::DeviceIndex>(device_index)) {
    c10::cuda::CUDAGuard guard(device_index_);
    events_.reserve(phases * max_iterations * 2);
    for (size_t i = 0; i < phases * max_iterations * 2; ++i) {
      events_.push_back(std::make_unique<CudaEvent>());
    }
    origin_ = std::make_unique<CudaEvent>();
  }

  std::vector<double> resolve() override {
    c10::cuda::CUDAGuard guard(device_index_);
    std::vector<double> seconds(rows() * phases(), 0.0);
    for (size_t row = 0; row < rows(); ++row) {
      for (size_t phase = 0; phase < phases(); ++phase) {
        if (!recorded(row, phase)) continue;
        seconds[row * phases() + phase] =
            seconds_between(event(row, phase, false), event(row, phase, true));
      }
    }
    return seconds;
  }

  std::vector<double> resolve_phase(size_t phase, size_t first_row, size_t end_row) override {
    c10::cuda::CUDAGuard guard(device_index_);
    std::vector<double> seconds;
    for (size_t row = first_row; row < std::min(end_row, rows()); ++row) {
      seconds.push_back(recorded(row, phase)
                            ? seconds_between(event(row, phase, false), event(row, phase, true))
                            : 0.0);
    }
    return seconds;
  }

  void mark_origin() override {
    c10::cuda::CUDAGuard guard(device_index_);
    const auto stream = c10::cuda::getCurrentCUDAStream(device_index_);
    CUDA_CHECK(cudaEventRecord(origin_->get(), stream.stream()));
    has_origin_ = true;
  }

  // cudaEventElapsedTime is float32 milliseconds: ~1 us resolution 10 s after the origin.
  // So each row's anchor (its whole-iteration phase, the last) is taken from the origin, and
  // the row's other phases from that anchor (a few ms: sub-microsecond), which keeps the
  // phases of one iteration exactly ordered however long the loop ran.
  std::vector<double> resolve_begins() override {
    c10::cuda::CUDAGuard guard(device_index_);
    std::vector<double> seconds(rows() * phases(), std::numeric_limits<double>::quiet_NaN());
    if (!has_origin_) return seconds;
    const size_t whole = phases() - 1;
    for (size_t row = 0; row < rows(); ++row) {
      const bool anchored = begun(row, whole);
      const double anchor =
          anchored ? seconds_between(origin_->get(), event(row, whole, false)) : 0.0;
      cudaEvent_t from = anchored ? event(row, whole, false) : origin_->get();
      for (size_t phase = 0; phase < phases(); ++phase) {
        if (!begun(row, phase)) continue;
        seconds[row * phases() + phase] =
            phase == whole ? anchor : anchor + seconds_between(from, event(row, phase, false));
      }
    }
    return seconds;
  }

 protected:
  void mark(size_t slot) override {
    const auto stream = c10::cuda::getCurrentCUDAStream(device_index_);
    CUDA_CHECK(cudaEventRecord(events_[slot]->get(), stream.stream()));
  }

 private:
  [[nodiscard]] cudaEvent_t event(size_t row, size_t phase, bool is_end) const {
    return events_[slot(row, phase, is_end)]->get();
  }
  /// Seconds from event `from` to the later event `to`; waits for `to`.
  static double seconds_between(cudaEvent_t from, cudaEvent_t to) {
    CUDA_CHECK(cudaEventSynchronize(to));
    float milliseconds = 0.0F;
    CUDA_CHECK(cudaEventElapsedTime(&milliseconds, from, to));
    return milliseconds / 1000.0;
  }

  c10::DeviceIndex device_index_;
  std::vector<std::unique_ptr<CudaEvent>> events_;
  std::unique_ptr<CudaEvent> origin_;  ///< created under the device guard, as the others
  bool has_origin_ = false;
};

}  // namespace

std::unique_ptr<PhaseTimer> make_cuda_phase_timer(int device_index, size_t phases,
                                                  size_t max_iterations) {
  return std::make_unique<CudaEventPhaseTimer>(device_index, phases, max_iterations);
}

}  // namespace scalebench
