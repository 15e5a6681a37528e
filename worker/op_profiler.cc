#include "worker/op_profiler.h"

#include <ATen/record_function.h>
#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace scalebench {
namespace {

namespace profiler = torch::autograd::profiler;
namespace impl = torch::profiler::impl;
using libkineto::ActivityType;

/// Name prefix of the phase scopes (Note [Operator profiles]).
constexpr std::string_view kPhaseScope = "scalebench.phase/";

/// The workload's timer during profiled steps: every begin/end is passed to `inner` (a timer
/// like the loop's) and also opens/closes a user scope named after the phase, so the
/// profiler's events say which phase they belong to. Phases nest (the last one spans the
/// others), so the scopes are a stack.
class PhaseScopeTimer : public PhaseTimer {
 public:
  PhaseScopeTimer(std::unique_ptr<PhaseTimer> inner, const std::vector<std::string>& phases,
                  size_t max_iterations)
      : PhaseTimer(phases.size(), max_iterations), inner_(std::move(inner)) {
    for (const auto& phase : phases) scope_names_.push_back(std::string(kPhaseScope) + phase);
  }
  std::vector<double> resolve() override { return inner_->resolve(); }
  std::vector<double> resolve_phase(size_t phase, size_t first_row, size_t end_row) override {
    return inner_->resolve_phase(phase, first_row, end_row);
  }
  void mark_origin() override { inner_->mark_origin(); }
  std::vector<double> resolve_begins() override { return inner_->resolve_begins(); }

 protected:
  void mark(size_t slot) override {
    const size_t row = slot / (phases() * 2);
    const size_t phase = (slot / 2) % phases();
    const bool is_end = slot % 2 == 1;
    for (; row_ < row; ++row_) inner_->next_iteration();
    if (is_end) {
      inner_->end(phase);
      if (!scopes_.empty()) scopes_.pop_back();  // ~RecordFunction ends the scope
      return;
    }
    auto scope = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
    if (scope->isActive()) scope->before(std::string_view(scope_names_[phase]));
    scopes_.push_back(std::move(scope));
    inner_->begin(phase);
  }

 private:
  std::unique_ptr<PhaseTimer> inner_;
  std::vector<std::string> scope_names_;
  std::vector<std::unique_ptr<at::RecordFunction>> scopes_;
  size_t row_ = 0;
};

/// Disables the profiler when it goes out of scope without disable() (a throw).
class ProfilerSession {
 public:
  ProfilerSession(const impl::ProfilerConfig& config, const std::set<impl::ActivityType>& kinds) {
    profiler::prepareProfiler(config, kinds);
    profiler::enableProfiler(config, kinds);
  }
  ~ProfilerSession() {
    if (!done_) profiler::disableProfiler();
  }
  ProfilerSession(const ProfilerSession&) = delete;
  ProfilerSession& operator=(const ProfilerSession&) = delete;
  std::unique_ptr<profiler::ProfilerResult> disable() {
    done_ = true;
    return profiler::disableProfiler();
  }

 private:
  bool done_ = false;
};

/// The profiler's events as summarize_profile takes them; events of other kinds (CUPTI
/// overhead, syncs, annotations on the GPU) are left out.
std::vector<ProfiledEvent> convert(const std::vector<profiler::KinetoEvent>& events) {
  std::vector<ProfiledEvent> out;
  out.reserve(events.size());
  for (const auto& event : events) {
    ProfiledEvent converted;
    const std::string name = event.name();
    const auto type = static_cast<ActivityType>(event.activityType());
    converted.thread = event.startThreadId();
    converted.start_ns = static_cast<int64_t>(event.startNs());
    converted.end_ns = static_cast<int64_t>(event.endNs());
    if (type == ActivityType::USER_ANNOTATION && name.starts_with(kPhaseScope)) {
      converted.kind = ProfiledEvent::Kind::kPhase;
      converted.name = name.substr(kPhaseScope.size());
    } else if (name == "[memory]") {  // the profiler's allocation events, whatever their type
      if (event.deviceType() != c10::DeviceType::CPU) continue;
      converted.kind = ProfiledEvent::Kind::kMemory;
      converted.bytes = event.nBytes();
    } else if (type == ActivityType::CPU_OP || type == ActivityType::USER_ANNOTATION ||
               type == ActivityType::CUDA_RUNTIME || type == ActivityType::CUDA_DRIVER) {
      converted.kind = ProfiledEvent::Kind::kOp;
      converted.name = name;
      converted.correlation = event.correlationId();
    } else if (type == ActivityType::CONCURRENT_KERNEL || type == ActivityType::GPU_MEMCPY ||
               type == ActivityType::GPU_MEMSET) {
      converted.kind = ProfiledEvent::Kind::kKernel;
      converted.name = name;
      converted.link = event.linkedCorrelationId();
    } else {
      continue;
    }
    out.push_back(std::move(converted));
  }
  return out;
}

}  // namespace

ProfiledSteps run_profiled_steps(Workload& workload, const torch::Device& device, int64_t steps,
                                 int64_t measured_run) {
  ProfiledSteps done;
  if (steps <= 0 || measured_run <= 0) return done;
  const auto rows = static_cast<size_t>(steps);
  PhaseScopeTimer timer(make_phase_timer(device, workload.phases().size(), rows), workload.phases(),
                        rows);
  std::set<impl::ActivityType> kinds{impl::ActivityType::CPU};
  done.profile.activities = {"cpu"};
  if (device.is_cuda()) {
    kinds.insert(impl::ActivityType::CUDA);
    done.profile.activities.emplace_back("cuda");
  }
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO, /*report_input_shapes=*/false,
                                    /*profile_memory=*/true);
  synchronize_device(device);
  std::unique_ptr<profiler::ProfilerResult> result;
  {
    ProfilerSession session(config, kinds);
    for (int64_t k = 0; k < steps; ++k) {
      workload.run_iteration(workload.warmup_iterations() + k % measured_run, timer);
      timer.next_iteration();
      ++done.profile.steps;
    }
    synchronize_device(device);
    result = session.disable();
  }
  done.step_s = timer.resolve_phase(timer.phases() - 1, 0, rows);
  done.profile.ops = summarize_profile(convert(result->events()));
  return done;
}

}  // namespace scalebench
