// The stall watchdog's parts in this process: the stacks of real threads blocked in real calls
// (and left blocked as they were), the waits in flight, the limit's rule, the report's form, and
// the watchdog reporting a wait that does not end, once, then again after progress.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "health/heartbeat.h"
#include "health/stall_report.h"
#include "health/thread_stacks.h"
#include "health/waits.h"
#include "health/watchdog.h"

namespace cifar::health {

// Out of the anonymous namespace and not inlined: the stack must show it by this name.
[[gnu::noinline]] char read_one_byte(int fd) {
  char byte = 0;
  const auto got = ::read(fd, &byte, 1);
  return got == 1 ? byte : '\0';
}

namespace {

using namespace std::chrono_literals;

// Polls `condition` for up to 10 s.
template <typename Condition>
bool eventually(Condition condition) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!condition() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  return condition();
}

// A thread named `name` blocked in read_one_byte() on a pipe until release(); with
// `signals_blocked`, every signal blocked, as a read held uninterruptibly in the kernel (a
// filesystem that stopped answering) runs no handler either.
class BlockedReader {
 public:
  explicit BlockedReader(const char* name, bool signals_blocked = false) {
    EXPECT_EQ(::pipe(fds_), 0);
    thread_ = std::thread([this, name, signals_blocked] {
      pthread_setname_np(pthread_self(), name);
      if (signals_blocked) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, nullptr);
      }
      named_.set_value(static_cast<pid_t>(::syscall(SYS_gettid)));
      got_ = read_one_byte(fds_[0]);
    });
    const auto id = named_.get_future().get();
    // Into the read: the kernel says the thread sleeps ("S" in its stat, after "(comm)").
    const auto sleeping = [&] {
      std::ifstream stat("/proc/self/task/" + std::to_string(id) + "/stat");
      const std::string text((std::istreambuf_iterator<char>(stat)),
                             std::istreambuf_iterator<char>());
      const auto end_of_name = text.rfind(')');
      return end_of_name != std::string::npos && text.compare(end_of_name, 4, ") S ") == 0;
    };
    EXPECT_TRUE(eventually(sleeping));
  }
  ~BlockedReader() {
    if (thread_.joinable()) release('x');
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  char release(char byte) {
    EXPECT_EQ(::write(fds_[1], &byte, 1), 1);
    thread_.join();
    return got_;
  }

 private:
  int fds_[2] = {-1, -1};
  std::promise<pid_t> named_;
  std::thread thread_;
  char got_ = '\0';
};

const ThreadStack* named(const std::vector<ThreadStack>& stacks, const std::string& name) {
  const auto it = std::find_if(stacks.begin(), stacks.end(),
                               [&](const ThreadStack& s) { return s.name == name; });
  return it == stacks.end() ? nullptr : &*it;
}

bool has_frame(const ThreadStack& stack, const std::string& function_part) {
  return std::any_of(stack.frames.begin(), stack.frames.end(), [&](const Frame& f) {
    return f.function.find(function_part) != std::string::npos;
  });
}

std::string frames_of(const ThreadStack& stack) {
  std::string out;
  for (const auto& f : stack.frames) out += f.function + " (" + f.module + ")\n";
  return out;
}

TEST(ThreadStacks, AThreadBlockedInAReadShowsTheCallAndGoesOnWaitingUnharmed) {
  BlockedReader reader("blocked-reader");
  const auto stacks = thread_stacks();
  const auto* stack = named(stacks, "blocked-reader");
  ASSERT_NE(stack, nullptr);
  EXPECT_TRUE(stack->captured);
  ASSERT_GE(stack->frames.size(), 2U);
  // The innermost frame is libc's read (its name varies: read, __libc_read), then ours.
  EXPECT_NE(stack->frames[0].function.find("read"), std::string::npos) << frames_of(*stack);
  EXPECT_EQ(stack->frames[0].module.rfind("libc", 0), 0U) << frames_of(*stack);
  EXPECT_TRUE(has_frame(*stack, "cifar::health::read_one_byte(int)")) << frames_of(*stack);
  // The signal interrupted the read, which went on (SA_RESTART): the byte still arrives.
  EXPECT_EQ(reader.release('k'), 'k');
}

// A thread that cannot answer: the report says which system call the kernel holds it in.
TEST(ThreadStacks, AThreadThatCannotAnswerIsShownInItsSystemCall) {
  BlockedReader reader("deaf-reader", /*signals_blocked=*/true);
  const auto stacks = thread_stacks();
  const auto* stack = named(stacks, "deaf-reader");
  ASSERT_NE(stack, nullptr);
  EXPECT_FALSE(stack->captured);
  EXPECT_EQ(stack->in_kernel.rfind("read", 0), 0U) << stack->in_kernel;
  EXPECT_EQ(reader.release('k'), 'k');
}

TEST(ThreadStacks, TheCallerIsFirstAndEveryThreadIsListed) {
  BlockedReader one("reader-one");
  BlockedReader two("reader-two");
  const auto stacks = thread_stacks();
  ASSERT_GE(stacks.size(), 3U);
  EXPECT_TRUE(stacks.front().captured);
  EXPECT_TRUE(has_frame(stacks.front(), "TheCallerIsFirstAndEveryThreadIsListed_Test::TestBody"))
      << frames_of(stacks.front());
  ASSERT_FALSE(stacks.front().frames.empty());
  EXPECT_EQ(stacks.front().frames.front().module, "test_health");  // cifar_health is static
  EXPECT_NE(named(stacks, "reader-one"), nullptr);
  EXPECT_NE(named(stacks, "reader-two"), nullptr);
}

TEST(Waits, InFlightOldestFirstAndTheLastFinishedKept) {
  {
    const Wait older("push-pull", "PS shard 0");
    const Wait newer("gradient all-reduce", "rank 0's group: the other rank");
    const auto now = waits();
    ASSERT_GE(now.in_flight.size(), 2U);
    const auto& first = now.in_flight[now.in_flight.size() - 2];
    EXPECT_EQ(first.what, "push-pull");
    EXPECT_EQ(first.peer, "PS shard 0");
    EXPECT_EQ(now.in_flight.back().what, "gradient all-reduce");
    EXPECT_GE(first.seconds, now.in_flight.back().seconds);
  }
  const auto after = waits();
  EXPECT_TRUE(std::none_of(after.in_flight.begin(), after.in_flight.end(),
                           [](const WaitRecord& w) { return w.what == "push-pull"; }));
  ASSERT_GE(after.finished.size(), 2U);
  EXPECT_EQ(after.finished.back().what, "push-pull");  // destroyed last

  for (int i = 0; i < 2 * kFinishedKept; ++i) const Wait quick("call " + std::to_string(i), "");
  const auto kept = waits().finished;
  ASSERT_EQ(kept.size(), static_cast<size_t>(kFinishedKept));
  EXPECT_EQ(kept.front().what, "call " + std::to_string(kFinishedKept));
  EXPECT_EQ(kept.back().what, "call " + std::to_string(2 * kFinishedKept - 1));
}

TEST(StallLimit, GivenOrTheFloorOrTenTimesTheLongestGapAndTheStartUpFloorUntilTheFirstStep) {
  ProgressState state;
  state.longest_interval = 2;
  state.starting = true;  // no step yet: start-up is no step, whatever the limit given
  EXPECT_EQ(stall_limit(45, kStallFloorSeconds, state).seconds, kStallFloorSeconds);
  EXPECT_NE(stall_limit(45, kStallFloorSeconds, state).rule.find("starting"), std::string::npos);
  EXPECT_EQ(stall_limit(900, kStallFloorSeconds, state).seconds, 900);
  // --stall-startup-seconds: a job whose start-up takes seconds sets a lower floor.
  EXPECT_EQ(stall_limit(20, 60, state).seconds, 60);
  EXPECT_EQ(stall_limit(0, 60, state).seconds, 60);
  EXPECT_NE(stall_limit(0, 60, state).rule.find("start-up floor, 60 s"), std::string::npos);
  EXPECT_EQ(stall_limit(90, 60, state).seconds, 90);
  state.starting = false;
  EXPECT_EQ(stall_limit(45, kStallFloorSeconds, state).seconds, 45);
  EXPECT_EQ(stall_limit(45, kStallFloorSeconds, state).rule, "--stall-seconds 45");
  EXPECT_EQ(stall_limit(0, kStallFloorSeconds, state).seconds, kStallFloorSeconds);
  state.longest_interval = 40;
  EXPECT_EQ(stall_limit(0, kStallFloorSeconds, state).seconds, kStallIntervals * 40);
  EXPECT_NE(stall_limit(0, kStallFloorSeconds, state).rule.find("longest gap"), std::string::npos);
}

TEST(Heartbeat, AnExpectedQuietIsNoStallAndItsEndRestartsTheClock) {
  note_progress();
  std::this_thread::sleep_for(200ms);
  EXPECT_GE(progress_state().seconds_since_progress, 0.2);
  {
    const ExpectedQuiet quiet("waiting for the group to form");
    std::this_thread::sleep_for(100ms);
    const auto state = progress_state();
    EXPECT_EQ(state.seconds_since_progress, 0);
    EXPECT_EQ(state.quiet_because, "waiting for the group to form");
  }
  EXPECT_LT(progress_state().seconds_since_progress, 0.1);
  EXPECT_EQ(progress_state().quiet_because, "");
}

StallFacts example_facts() {
  StallFacts facts;
  facts.who = "worker 1";
  facts.pid = 100;
  facts.limit_seconds = 30;
  facts.limit_rule = "--stall-seconds 30";
  facts.progress.seconds_since_progress = 31.5;
  facts.progress.progress_marks = 42;
  facts.progress.longest_interval = 0.8;
  facts.waits.in_flight = {{"push-pull", "PS shard 0 (ps-0:2222, stripe 0)", 101, 31.4, 0}};
  facts.waits.finished = {{"push-pull", "PS shard 0 (ps-0:2222, stripe 0)", 101, 0.2, 31.4}};
  ThreadStack main{100,
                   "cifar-train",
                   true,
                   {{0x10, "__futex_abstimed_wait_common", "libc.so.6", ""},
                    {0x20, "cifar::ps::PsClient::push_pull(int)", "cifar-train", "client.cpp:300"},
                    {0x30, "main", "cifar-train", ""}},
                   ""};
  ThreadStack silent{102, "grpc_global_tim", false, {}, ""};
  ThreadStack held{103, "cifar-train", false, {}, "read, waiting in request_wait_answer"};
  facts.stacks = {main, silent, held};
  return facts;
}

TEST(StallReport, SaysWhoHowLongTheWaitsAndEveryThreadsStack) {
  const auto report = format_stall_report(example_facts());
  for (const auto* part :
       {"stall report: worker 1 (pid 100) made no progress for 31.5 s (limit 30 s: "
        "--stall-seconds 30); 42 progress marks so far",
        "waiting on (oldest first):\n  push-pull with PS shard 0 (ps-0:2222, stripe 0), for 31.4 s "
        "(thread 101)",
        "last finished (newest last):", "thread 100 \"cifar-train\" (main)",
        "cifar::ps::PsClient::push_pull(int) at client.cpp:300 (cifar-train)",
        "thread 102 \"grpc_global_tim\": did not answer (signals blocked?)",
        "thread 103 \"cifar-train\": did not answer, held in the kernel: read, waiting in "
        "request_wait_answer"}) {
    EXPECT_NE(report.find(part), std::string::npos) << part << "\nin:\n" << report;
  }
}

TEST(StallReport, TheSummaryNamesTheOldestWaitAndWhereTheMainThreadIs) {
  EXPECT_EQ(summarize_stall(example_facts()),
            "stalled: no progress for 32 s (limit 30 s); waiting on push-pull with PS shard 0 "
            "(ps-0:2222, stripe 0) for 31 s; main thread in cifar::ps::PsClient::push_pull(int) "
            "(innermost: __futex_abstimed_wait_common (libc.so.6))");
  // A main thread that could not answer: where the kernel holds it.
  auto facts = example_facts();
  facts.stacks.front().captured = false;
  facts.stacks.front().frames.clear();
  facts.stacks.front().in_kernel = "read, waiting in request_wait_answer";
  EXPECT_EQ(summarize_stall(facts),
            "stalled: no progress for 32 s (limit 30 s); waiting on push-pull with PS shard 0 "
            "(ps-0:2222, stripe 0) for 31 s; main thread held in the kernel: read, waiting in "
            "request_wait_answer");
}

TEST(StallWatchdog, ReportsAWaitThatDoesNotEndOnceThenAgainAfterProgress) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("cifar-stall-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::atomic<int> reports{0};
  std::string summary;
  std::mutex mutex;
  note_progress();
  {
    WatchdogOptions options;
    options.who = "worker 7";
    options.stall_seconds = 1;
    options.report_dir = dir.string();
    options.poll = 50ms;
    options.on_stall = [&](const std::string& line) {
      const std::lock_guard lock(mutex);
      summary = line;
      ++reports;
    };
    const StallWatchdog watchdog(options);
    BlockedReader reader("stuck-reader");
    const Wait stuck("read of the test batch", "a pipe nobody writes");
    ASSERT_TRUE(eventually([&] { return reports.load() == 1; }));
    std::this_thread::sleep_for(1500ms);  // stalled on, past the limit again
    EXPECT_EQ(reports.load(), 1);         // once per stall, not once a poll
    {
      const std::lock_guard lock(mutex);
      EXPECT_NE(summary.find("waiting on read of the test batch with a pipe nobody writes"),
                std::string::npos)
          << summary;
    }
    note_progress();  // progress re-arms it
    EXPECT_TRUE(eventually([&] { return reports.load() == 2; }));
    {
      const ExpectedQuiet quiet("waiting for the next checkpoint");
      std::this_thread::sleep_for(1500ms);
      EXPECT_EQ(reports.load(), 2);  // no stall while quiet
    }
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path());
  ASSERT_FALSE(files.empty());
  std::ifstream file(files.front());
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("stall report: worker 7"), std::string::npos) << text;
  EXPECT_NE(text.find("\"stuck-reader\""), std::string::npos) << text;
  EXPECT_NE(text.find("cifar::health::read_one_byte(int)"), std::string::npos) << text;
  std::filesystem::remove_all(dir);
}

// What the metrics read (cifar_stall_limit_seconds, cifar_stall_reported): the limit while a
// watchdog runs, and the stall's summary from its report until progress comes again.
TEST(StallWatchdog, SaysItsLimitAndTheStallItReportedUntilProgressComes) {
  EXPECT_EQ(stall_status().limit_seconds, 0);  // no watchdog
  note_progress();
  {
    WatchdogOptions options;
    options.who = "rank 1";
    options.stall_seconds = 1;
    options.poll = 50ms;
    const StallWatchdog watchdog(options);
    ASSERT_TRUE(eventually([] { return stall_status().limit_seconds == 1; }));
    EXPECT_EQ(stall_status().summary, "");
    const Wait stuck("gradient all-reduce", "the other rank");
    ASSERT_TRUE(eventually([] { return !stall_status().summary.empty(); }));
    EXPECT_NE(stall_status().summary.find("waiting on gradient all-reduce with the other rank"),
              std::string::npos)
        << stall_status().summary;
    note_progress();
    EXPECT_TRUE(eventually([] { return stall_status().summary.empty(); }));
    EXPECT_EQ(stall_status().limit_seconds, 1);
  }
  EXPECT_EQ(stall_status().limit_seconds, 0);
}

}  // namespace
}  // namespace cifar::health
