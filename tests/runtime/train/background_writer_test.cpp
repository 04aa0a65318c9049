// The background writer of checkpoints and the monitor log: in order, one at a time, at most one
// waiting (a newer one takes its place), and a failure thrown on the caller's thread.
#include "train/background_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "storage/cancellation.h"

namespace cifar::train {
namespace {

// A store stand-in for the writer's commit: records what it writes, and holds a write until let go.
struct HeldCommits {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<int64_t> written;
  bool holding = true;
  int started = 0;

  void commit(const PendingWrite& write) {
    std::unique_lock lock(mu);
    ++started;
    changed.notify_all();
    changed.wait(lock, [&] { return !holding; });
    if (write.step == 13) throw std::runtime_error("the store refused step 13");
    written.push_back(write.step);
  }
  void wait_until_started(int n) {
    std::unique_lock lock(mu);
    changed.wait(lock, [&] { return started >= n; });
  }
  void let_go() {
    const std::lock_guard guard(mu);
    holding = false;
    changed.notify_all();
  }
};

TEST(BackgroundWriter, WhileOneIsWrittenTheNewestWaitsAndTheOnesBetweenAreDropped) {
  HeldCommits commits;
  BackgroundWriter writer([&](const PendingWrite& write) { commits.commit(write); });
  writer.submit({"a", "1", 1});
  commits.wait_until_started(1);  // step 1 is being written, held
  writer.submit({"a", "2", 2});
  writer.submit({"a", "3", 3});  // takes step 2's place
  EXPECT_EQ(writer.unsaved_step(), 3);
  EXPECT_FALSE(writer.saved_step());
  commits.let_go();
  writer.wait_until_saved();
  EXPECT_EQ(commits.written, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(writer.saved_step(), 3);
  EXPECT_FALSE(writer.unsaved_step());
}

TEST(BackgroundWriter, AFailedWriteIsThrownByTheNextCallAndWhatWaitedIsDropped) {
  HeldCommits commits;
  commits.let_go();
  BackgroundWriter writer([&](const PendingWrite& write) { commits.commit(write); });
  writer.submit({"a", "12", 12});
  writer.wait_until_saved();
  writer.submit({"a", "13", 13});
  EXPECT_THROW(writer.wait_until_saved(), std::runtime_error);
  EXPECT_THROW(writer.raise_if_failed(), std::runtime_error);
  try {
    writer.submit({"a", "14", 14});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the store refused step 13");
  }
  EXPECT_EQ(commits.written, (std::vector<int64_t>{12}));
  EXPECT_EQ(writer.saved_step(), 12);
}

// Destroyed while a write rides out an outage (here a wait for a store that stays away for ten
// minutes): the write is given its grace, then cancelled, and its thread is joined, so that no
// write outlives the process's main().
TEST(BackgroundWriter, AWriteStillWaitingForItsStoreIsCancelledWhenTheWriterGoes) {
  std::atomic<bool> cancelled = false;
  std::atomic<bool> started = false;
  std::chrono::steady_clock::time_point destroyed;
  {
    BackgroundWriter writer([&](const PendingWrite& write) {
      started = true;
      try {
        storage::wait_before_retry(std::chrono::minutes(10), write.name);
      } catch (const storage::Cancelled&) {
        cancelled = true;
        throw;
      }
    });
    writer.submit({"monitor.jsonl", "{}", 3});
    while (!started) std::this_thread::yield();
    destroyed = std::chrono::steady_clock::now();
  }
  EXPECT_TRUE(cancelled);
  const auto took = std::chrono::steady_clock::now() - destroyed;
  EXPECT_GE(took, BackgroundWriter::kGraceOnClose);
  EXPECT_LT(took, BackgroundWriter::kGraceOnClose + std::chrono::seconds(2));
}

// A write that finishes within the grace is not cancelled: the writer waits for it.
TEST(BackgroundWriter, AWriteThatFinishesWithinTheGraceIsKept) {
  HeldCommits commits;
  std::thread let_go;
  {
    BackgroundWriter writer([&](const PendingWrite& write) { commits.commit(write); });
    writer.submit({"a", "7", 7});
    commits.wait_until_started(1);
    let_go = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      commits.let_go();
    });
  }  // waits for the held write, which is let go half a second later
  let_go.join();
  EXPECT_EQ(commits.written, (std::vector<int64_t>{7}));
}

// Closed with a write in progress and one waiting behind it: a checkpoint writer drops the waiting
// one (a newer state is held elsewhere); a log's writer writes it too, so that a record appended
// just before its writer closes (an elastic round ending right after an epoch) is not lost.
TEST(BackgroundWriter, ClosedWithAWriteWaitingALogsWriterWritesItAndACheckpointsDropsIt) {
  for (const auto on_close :
       {BackgroundWriter::OnClose::kDropWaiting, BackgroundWriter::OnClose::kWriteWaiting}) {
    HeldCommits commits;
    std::thread let_go;
    {
      BackgroundWriter writer([&](const PendingWrite& write) { commits.commit(write); }, on_close);
      writer.submit({"a", "1", 1});
      commits.wait_until_started(1);
      writer.submit({"a", "2", 2});  // waits behind step 1
      let_go = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        commits.let_go();
      });
    }
    let_go.join();
    const std::vector<int64_t> kept = on_close == BackgroundWriter::OnClose::kWriteWaiting
                                          ? std::vector<int64_t>{1, 2}
                                          : std::vector<int64_t>{1};
    EXPECT_EQ(commits.written, kept);
  }
}

}  // namespace
}  // namespace cifar::train
