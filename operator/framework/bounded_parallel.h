// Work over many items with a bound on how much of it runs at once: the progress scraper reads
// thousands of pods a round, and one connection a pod held at once (each for its whole timeout
// when pods do not answer) is thousands of sockets and their buffers.
#pragma once

#include <cstddef>
#include <functional>

namespace cifar::op {

// Calls work(i) once for every i in [0, count), on at most `limit` threads at once (at least
// one), and returns when every call has returned. `work` must not throw.
void for_each_bounded(std::size_t count, std::size_t limit,
                      const std::function<void(std::size_t)>& work);

}  // namespace cifar::op
