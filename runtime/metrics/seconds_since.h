// The seconds since a steady-clock instant, as the runtime's timings and metrics record them.
#pragma once

#include <chrono>

namespace cifar::metrics {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace cifar::metrics
