#include "protocol/signals.h"

#include <array>

namespace scalebench {
namespace {

constexpr std::array<int, 3> kStopSignals{SIGTERM, SIGUSR1, SIGINT};

volatile std::sig_atomic_t g_stop_count = 0;
volatile std::sig_atomic_t g_last_signal = 0;

extern "C" void record_stop_signal(int signal_number) {
  g_last_signal = signal_number;
  g_stop_count = g_stop_count + 1;
}

void install(void (*handler)(int), struct sigaction (&previous)[3]) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (size_t i = 0; i < kStopSignals.size(); ++i) {
    sigaction(kStopSignals[i], &action, &previous[i]);
  }
}

void restore(const struct sigaction (&previous)[3]) {
  for (size_t i = 0; i < kStopSignals.size(); ++i) {
    sigaction(kStopSignals[i], &previous[i], nullptr);
  }
}

}  // namespace

StopSignalHandler::StopSignalHandler() {
  g_stop_count = 0;
  g_last_signal = 0;
  install(record_stop_signal, previous_);
}

StopSignalHandler::~StopSignalHandler() { restore(previous_); }

int StopSignalHandler::count() { return g_stop_count; }

int StopSignalHandler::last_signal() { return g_last_signal; }

IgnoreStopSignals::IgnoreStopSignals() { install(SIG_IGN, previous_); }

IgnoreStopSignals::~IgnoreStopSignals() { restore(previous_); }

}  // namespace scalebench
