// The signal (SIGINT, SIGTERM) that asked a foreground command (launch, rendezvous-store) to
// stop: 0 until one came.
#pragma once

#include <csignal>

namespace cifar::cli {

inline volatile std::sig_atomic_t g_stop_signal = 0;

inline void catch_stop_signals() {
  const auto remember = [](int signal) { g_stop_signal = signal; };
  std::signal(SIGINT, remember);
  std::signal(SIGTERM, remember);
}

}  // namespace cifar::cli
