#include "worker/phase_timer.h"

#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "common/base/error.h"

namespace scalebench {

PhaseTimer::PhaseTimer(size_t phases, size_t max_iterations)
    : phases_(phases), max_iterations_(max_iterations), marked_(phases * max_iterations * 2) {}

void PhaseTimer::begin(size_t phase) { record(phase, false); }
void PhaseTimer::end(size_t phase) { record(phase, true); }

void PhaseTimer::next_iteration() {
  if (row_ < rows_) ++row_;
}

void PhaseTimer::record(size_t phase, bool is_end) {
  if (row_ >= max_iterations_ || phase >= phases_) {
    throw std::out_of_range("PhaseTimer: iteration " + std::to_string(row_) + " phase " +
                            std::to_string(phase) + " outside " + std::to_string(max_iterations_) +
                            " x " + std::to_string(phases_));
  }
  rows_ = std::max(rows_, row_ + 1);
  const size_t index = slot(row_, phase, is_end);
  marked_[index] = true;
  mark(index);
}

bool PhaseTimer::recorded(size_t row, size_t phase) const {
  return marked_[slot(row, phase, false)] && marked_[slot(row, phase, true)];
}

namespace {

class SteadyClockPhaseTimer : public PhaseTimer {
 public:
  SteadyClockPhaseTimer(size_t phases, size_t max_iterations)
      : PhaseTimer(phases, max_iterations), marks_(phases * max_iterations * 2) {}

  std::vector<double> resolve() override {
    std::vector<double> seconds(rows() * phases(), 0.0);
    for (size_t row = 0; row < rows(); ++row) {
      for (size_t phase = 0; phase < phases(); ++phase) {
        if (!recorded(row, phase)) continue;
        const auto elapsed = marks_[slot(row, phase, true)] - marks_[slot(row, phase, false)];
        seconds[row * phases() + phase] = std::chrono::duration<double>(elapsed).count();
      }
    }
    return seconds;
  }

  std::vector<double> resolve_phase(size_t phase, size_t first_row, size_t end_row) override {
    std::vector<double> seconds;
    for (size_t row = first_row; row < std::min(end_row, rows()); ++row) {
      seconds.push_back(recorded(row, phase)
                            ? std::chrono::duration<double>(marks_[slot(row, phase, true)] -
                                                            marks_[slot(row, phase, false)])
                                  .count()
                            : 0.0);
    }
    return seconds;
  }

  void mark_origin() override { origin_ = std::chrono::steady_clock::now(); }

  std::vector<double> resolve_begins() override {
    std::vector<double> seconds(rows() * phases(), std::numeric_limits<double>::quiet_NaN());
    if (!origin_) return seconds;
    for (size_t row = 0; row < rows(); ++row) {
      for (size_t phase = 0; phase < phases(); ++phase) {
        if (!begun(row, phase)) continue;
        const auto offset = marks_[slot(row, phase, false)] - *origin_;
        seconds[row * phases() + phase] = std::chrono::duration<double>(offset).count();
      }
    }
    return seconds;
  }

 protected:
  void mark(size_t slot) override { marks_[slot] = std::chrono::steady_clock::now(); }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
  std::optional<std::chrono::steady_clock::time_point> origin_;
};

}  // namespace

std::unique_ptr<PhaseTimer> make_phase_timer(const torch::Device& device, size_t phases,
                                             size_t max_iterations) {
  if (device.is_cpu()) return std::make_unique<SteadyClockPhaseTimer>(phases, max_iterations);
#ifdef SCALEBENCH_HAVE_CUDA
  if (device.is_cuda()) return make_cuda_phase_timer(device.index(), phases, max_iterations);
#endif
  throw CellError(FailurePhase::kTimer, "no phase timer for device " + device.str() +
                                            " in this build (CUDA code not compiled)");
}

void synchronize_device(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace scalebench
