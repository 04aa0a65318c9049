// for_each_bounded with real threads: every item once, never more at once than the bound.
#include "framework/bounded_parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace cifar::op::bounded_parallel_test {
namespace {

// How many calls ran at once at most, and how often each item was called.
struct Observed {
  int most_at_once = 0;
  std::vector<int> calls;
};

Observed run(std::size_t count, std::size_t limit) {
  Observed seen;
  seen.calls.assign(count, 0);
  std::mutex mutex;
  int at_once = 0;
  for_each_bounded(count, limit, [&](std::size_t i) {
    {
      const std::lock_guard lock(mutex);
      seen.most_at_once = std::max(seen.most_at_once, ++at_once);
      ++seen.calls[i];
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a read waiting for its answer
    const std::lock_guard lock(mutex);
    --at_once;
  });
  return seen;
}

TEST(ForEachBounded, CallsEveryItemOnceWithNoMoreAtOnceThanTheBound) {
  const auto seen = run(200, 8);
  EXPECT_EQ(std::count(seen.calls.begin(), seen.calls.end(), 1), 200);
  EXPECT_LE(seen.most_at_once, 8);
  EXPECT_GT(seen.most_at_once, 1);  // they do overlap: waits are spent side by side
}

TEST(ForEachBounded, ABoundAboveTheItemsStartsOneThreadAnItem) {
  const auto seen = run(3, 64);
  EXPECT_EQ(std::count(seen.calls.begin(), seen.calls.end(), 1), 3);
  EXPECT_LE(seen.most_at_once, 3);
}

TEST(ForEachBounded, ABoundOfZeroStillDoesTheWorkOneAtATime) {
  const auto seen = run(5, 0);
  EXPECT_EQ(std::count(seen.calls.begin(), seen.calls.end(), 1), 5);
  EXPECT_EQ(seen.most_at_once, 1);
}

TEST(ForEachBounded, NoItemsNoCalls) {
  int calls = 0;
  for_each_bounded(0, 4, [&](std::size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace cifar::op::bounded_parallel_test
