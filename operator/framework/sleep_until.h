// A sleep that a stop flag cuts short: the loops of the informers, the leader elector and the
// progress scraper wait in short slices so that shutdown is prompt.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "framework/clock.h"

namespace cifar::op {

inline void sleep_until_or_stop(const std::atomic<bool>& stop, Steady::time_point until) {
  while (!stop.load() && Steady::now() < until) {
    std::this_thread::sleep_for(
        std::min<Steady::duration>(std::chrono::milliseconds(50), until - Steady::now()));
  }
}

}  // namespace cifar::op
