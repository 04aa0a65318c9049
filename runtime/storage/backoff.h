// Exponential backoff with jitter, as retries of a remote store want it: each wait twice the last
// (up to `most`), plus up to half again at random, so that many clients that failed together do
// not all come back in the same instant.
#pragma once

#include <algorithm>
#include <chrono>
#include <random>

namespace cifar::storage {

class Backoff {
 public:
  Backoff(std::chrono::milliseconds first, std::chrono::milliseconds most)
      : next_(first), most_(most) {}

  // The wait before the next try.
  std::chrono::milliseconds next() {
    thread_local std::mt19937 jitter{std::random_device{}()};
    std::uniform_int_distribution<int64_t> spread(0, next_.count() / 2);
    const auto wait = next_ + std::chrono::milliseconds(spread(jitter));
    next_ = std::min(next_ * 2, most_);
    return wait;
  }

 private:
  std::chrono::milliseconds next_;
  std::chrono::milliseconds most_;
};

}  // namespace cifar::storage
