// Per-iteration phase timers, one API for CPU and GPU.
//
// Note [Cell timing protocol]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A workload iteration is a row; each named phase is a column. The last phase of every
// workload spans the whole iteration (`step` in training, `batch` in inference) and the
// others are nested inside it, so `whole - sum(others)` is the time spent outside every
// named phase (glue code, timer overhead), visible rather than lost.
//   * CPU device: begin/end read std::chrono::steady_clock.
//   * CUDA device: begin/end record a pre-created CUDA event on the current stream of the
//     device (the compute stream). Nothing synchronises inside the timed loop; resolve()
//     synchronises the events once, after the loop, and reads cudaEventElapsedTime. Phase
//     times are then intervals of the GPU stream's timeline: a host-only phase (`data`)
//     measures how long the stream advanced while the host worked, which is ~0 when the
//     GPU is busy with queued work.
// A phase not begun and ended in an iteration reads 0.
//
// Note [Shared cell clock]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// For the per-rank timeline (`scalebench trace`) each rank also records when every phase
// began, relative to an origin: mark_origin(), called by every rank of the group right
// after a barrier that precedes the first iteration, so the ranks' origins agree to the
// barrier's exit skew (microseconds within a node). On CUDA the origin is an event on the
// same stream, recorded after the device was synchronised. The rank also records the
// system clock at its origin (rank metric `loop_origin_epoch_s`), which places the cell on
// the run's timeline next to rank 0's dispatch and write events (clocks of different nodes
// agree only as far as NTP makes them).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace scalebench {

class PhaseTimer {
 public:
  PhaseTimer(size_t phases, size_t max_iterations);
  virtual ~PhaseTimer() = default;
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

  /// Marks the start / end of `phase` in the current iteration (row). Throws
  /// std::out_of_range past max_iterations or the phase count.
  void begin(size_t phase);
  void end(size_t phase);
  /// Moves to the next row; the first row is current after construction.
  void next_iteration();
  /// Rows started so far (iterations with at least one begin()).
  [[nodiscard]] size_t rows() const { return rows_; }
  [[nodiscard]] size_t phases() const { return phases_; }
  /// Row-major [rows()][phases()] seconds. On CUDA this waits for the recorded events.
  [[nodiscard]] virtual std::vector<double> resolve() = 0;
  /// Seconds of `phase` in rows [first_row, end_row) (0 where not recorded), for decisions
  /// inside the loop (Note [Iterations auto]). On CUDA this waits for those rows' events.
  [[nodiscard]] virtual std::vector<double> resolve_phase(size_t phase, size_t first_row,
                                                          size_t end_row) = 0;
  /// Note [Shared cell clock]: marks the origin of the begin times now.
  virtual void mark_origin() = 0;
  /// Row-major [rows()][phases()] seconds from the origin to each phase's begin; NaN for
  /// a phase not recorded in a row, and everywhere when mark_origin was not called. On
  /// CUDA this waits for the recorded events.
  [[nodiscard]] virtual std::vector<double> resolve_begins() = 0;

 protected:
  /// Records mark `slot` (= (row * phases + phase) * 2 + is_end) now.
  virtual void mark(size_t slot) = 0;
  /// True when both marks of (row, phase) were recorded.
  [[nodiscard]] bool recorded(size_t row, size_t phase) const;
  /// True when the begin mark of (row, phase) was recorded.
  [[nodiscard]] bool begun(size_t row, size_t phase) const {
    return marked_[slot(row, phase, false)];
  }
  [[nodiscard]] size_t slot(size_t row, size_t phase, bool is_end) const {
    return (row * phases_ + phase) * 2 + (is_end ? 1 : 0);
  }

 private:
  void record(size_t phase, bool is_end);
  size_t phases_;
  size_t max_iterations_;
  size_t row_ = 0;
  size_t rows_ = 0;
  std::vector<bool> marked_;
};

/// Ends a phase when it goes out of scope (also on an exception).
class PhaseScope {
 public:
  PhaseScope(PhaseTimer& timer, size_t phase) : timer_(timer), phase_(phase) {
    timer_.begin(phase_);
  }
  ~PhaseScope() { timer_.end(phase_); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseTimer& timer_;
  size_t phase_;
};

/// steady_clock timer on CPU devices, CUDA-event timer on CUDA devices. Throws CellError
/// for a CUDA device when this build has no CUDA code.
std::unique_ptr<PhaseTimer> make_phase_timer(const torch::Device& device, size_t phases,
                                             size_t max_iterations);

/// Waits for all queued work of `device` (no-op on CPU).
void synchronize_device(const torch::Device& device);

#ifdef SCALEBENCH_HAVE_CUDA
/// CUDA-event timer on `device_index` (worker/phase_timer_cuda.cc). Events are created
/// here, before the timed loop.
std::unique_ptr<PhaseTimer> make_cuda_phase_timer(int device_index, size_t phases,
                                                  size_t max_iterations);
#endif

}  // namespace scalebench
