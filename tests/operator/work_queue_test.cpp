// The work queue's guarantees, with real threads and clocks (delays of a few milliseconds).
#include "framework/work_queue.h"

#include <gtest/gtest.h>

#include <thread>

namespace cifar::op::work_queue_test {
namespace {

using std::chrono::milliseconds;

TEST(WorkQueue, AKeyIsQueuedOnceHoweverOftenAdded) {
  WorkQueue q;
  q.add("ns/a");
  q.add("ns/b");
  q.add("ns/a");
  EXPECT_EQ(q.depth(), 2U);
  EXPECT_EQ(q.get(), "ns/a");
  EXPECT_EQ(q.get(), "ns/b");
}

TEST(WorkQueue, AKeyAddedWhileInProcessComesBackOnlyWhenDone) {
  WorkQueue q;
  q.add("ns/a");
  const auto key = q.get();
  q.add("ns/a");             // a change arrived while a worker reconciles it
  EXPECT_EQ(q.depth(), 0U);  // no second worker may take it now
  q.done(*key);
  EXPECT_EQ(q.depth(), 1U);
  EXPECT_EQ(q.get(), "ns/a");
}

TEST(WorkQueue, DelayedKeysComeWhenDueInOrder) {
  WorkQueue q;
  const auto start = Steady::now();
  q.add_after("ns/late", milliseconds(60));
  q.add_after("ns/early", milliseconds(20));
  EXPECT_EQ(q.get(), "ns/early");
  EXPECT_GE(Steady::now() - start, milliseconds(20));
  EXPECT_EQ(q.get(), "ns/late");
  EXPECT_GE(Steady::now() - start, milliseconds(60));
}

// Every reconcile of a job with a deadline asks to look again at it: the delayed set keeps one
// entry per key, the earliest, instead of one per request until each comes due.
TEST(WorkQueue, AKeyWaitsInTheDelayedSetOnceAtItsEarliestTime) {
  WorkQueue q;
  for (int i = 0; i < 100; ++i) q.add_after("ns/a", std::chrono::seconds(60 + i));
  q.add_after("ns/b", std::chrono::seconds(60));
  EXPECT_EQ(q.delayed_depth(), 2U);
  const auto start = Steady::now();
  q.add_after("ns/a", milliseconds(20));          // sooner: replaces the 60 s entry
  q.add_after("ns/a", std::chrono::seconds(90));  // later: the 20 ms entry stays
  EXPECT_EQ(q.delayed_depth(), 2U);
  EXPECT_EQ(q.get(), "ns/a");
  EXPECT_GE(Steady::now() - start, milliseconds(20));
  EXPECT_LT(Steady::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(q.delayed_depth(), 1U);  // ns/a is no longer waiting; ns/b is
  q.done("ns/a");
  q.add_after("ns/a", milliseconds(10));  // after it came due it can wait again
  EXPECT_EQ(q.delayed_depth(), 2U);
  EXPECT_EQ(q.get(), "ns/a");
}

TEST(WorkQueue, FailuresBackOffExponentiallyUntilForgotten) {
  WorkQueue q(milliseconds(10), milliseconds(40));
  std::vector<milliseconds> waits;
  for (int i = 0; i < 6; ++i) {
    const auto start = Steady::now();
    q.add_rate_limited("ns/a");
    const auto key = q.get();
    waits.push_back(std::chrono::duration_cast<milliseconds>(Steady::now() - start));
    q.done(*key);
  }
  EXPECT_GE(waits[0], milliseconds(10));
  EXPECT_GE(waits[1], milliseconds(20));
  EXPECT_GE(waits[2], milliseconds(40));
  // Capped at 40 ms: uncapped, the sixth wait would be 320 ms.
  EXPECT_GE(waits[5], milliseconds(40));
  EXPECT_LT(waits[5], milliseconds(300));
  EXPECT_EQ(q.failures("ns/a"), 6);
  q.forget("ns/a");
  EXPECT_EQ(q.failures("ns/a"), 0);
}

TEST(WorkQueue, ShutDownWakesBlockedWorkers) {
  WorkQueue q;
  std::optional<std::string> got = "unset";
  std::thread worker([&] { got = q.get(); });
  std::this_thread::sleep_for(milliseconds(20));
  q.shut_down();
  worker.join();
  EXPECT_FALSE(got.has_value());
}

}  // namespace
}  // namespace cifar::op::work_queue_test
