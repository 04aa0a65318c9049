#include "framework/bounded_parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace cifar::op {

void for_each_bounded(std::size_t count, std::size_t limit,
                      const std::function<void(std::size_t)>& work) {
  std::atomic<std::size_t> next{0};
  const auto drain = [&] {
    for (auto i = next++; i < count; i = next++) work(i);
  };
  std::vector<std::thread> helpers;
  // Joined however this returns: a thread that cannot be started leaves the others to finish.
  struct JoinAll {
    std::vector<std::thread>& threads;
    ~JoinAll() {
      for (auto& t : threads) t.join();
    }
  } join_all{helpers};
  const auto threads = std::min(count, std::max<std::size_t>(limit, 1));
  for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(drain);
  drain();  // this thread is one of them
}

}  // namespace cifar::op
