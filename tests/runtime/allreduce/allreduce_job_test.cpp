// Whole all-reduce jobs as real processes on loopback (Gloo): `cifar-train launch -n N` equals
// single-process training with the global batch, overlap and no-overlap give identical
// parameters, a killed rank's replacement joins the ranks left inside their processes, which
// hand it what they trained (and a rank never replaced ends them with a clear error), and a job
// resumed from its checkpoint ends where an uninterrupted one does.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "contract/env.h"
#include "storage/store.h"
#include "tests/support/monitor_records.h"
#include "tests/support/object_store.h"
#include "tests/support/parameters.h"
#include "tests/support/process.h"
#include "tests/support/train_args.h"
#include "train/checkpoint.h"

namespace cifar {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using cifar::testing::ChildProcess;
using cifar::testing::epochs_not_training_each_sample_once;
using cifar::testing::expect_same_training;
using cifar::testing::parameters_in;
using cifar::testing::read_file;
using cifar::testing::recorded_epochs;
using cifar::testing::TempDir;
using cifar::testing::TrainArgs;

// alexnet: no dropout or batch norm, so data parallelism changes nothing but summation order.
std::vector<std::string> command(const fs::path& work, const std::string& model_dir,
                                 std::vector<std::string> prefix,
                                 const std::vector<std::string>& extra) {
  return TrainArgs(std::move(prefix))
      .dirs(work, model_dir)
      .synthetic("alexnet", 576, 64)
      .add({"-e", "2", "--lr", "0.01"})
      .single_threaded()
      .no_metrics_server()
      .add({"--progress", "none"})
      .add(extra)
      .args();
}

std::vector<std::string> launch(int ranks) {
  return {CIFAR_TRAIN_BIN,       "launch",        "-n",
          std::to_string(ranks), "--master-port", std::to_string(cifar::testing::free_port())};
}

// Rank `r` of `world` started on its own, as a pod is: the PyTorch env, the store on
// 127.0.0.1:port.
std::vector<std::string> rank_of(int r, int world, int port) {
  return {"/usr/bin/env",
          "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=" + std::to_string(port),
          "WORLD_SIZE=" + std::to_string(world),
          "RANK=" + std::to_string(r),
          CIFAR_TRAIN_BIN,
          "--strategy",
          "allreduce"};
}
std::vector<std::string> rank_of_two(int r, int port) { return rank_of(r, 2, port); }

fs::path step_checkpoint(const fs::path& dir, int step) {
  return dir / ("alexnet-step-" + std::string(10 - std::to_string(step).size(), '0') +
                std::to_string(step) + ".pt");
}

// The job ran with --verify-replicas-every 1: every rank checked, after each of `steps` steps,
// that all ranks held bit-identical parameters and buffers (a mismatch fails the job).
void expect_replicas_verified_every_step(const std::string& output, int ranks, int steps) {
  for (int r = 0; r < ranks; ++r) {
    EXPECT_NE(output.find("rank " + std::to_string(r) + ": replicas bit-identical at all " +
                          std::to_string(steps) + " checks (every 1 steps)"),
              std::string::npos)
        << output;
  }
}

// Two ranks of batch 16, and three sharing a --global-batch of 32 unevenly (11, 11, 10: each
// rank's loss weighted by its share), train as one process of batch 32 does.
TEST(AllReduceJob, RanksEqualSingleProcessTrainingWithTheGlobalBatch) {
  TempDir work;
  const auto single = cifar::testing::run_process(
      command(work.path(), "single", {CIFAR_TRAIN_BIN}, {"-b", "32", "--max-steps", "6"}));
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto want = parameters_in(step_checkpoint(work.path() / "single", 6));
  const std::vector<std::pair<int, std::vector<std::string>>> jobs = {
      {2, {"-b", "16"}}, {3, {"--global-batch", "32"}}};
  for (const auto& [ranks, batch] : jobs) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const auto dir = "ranks-" + std::to_string(ranks);
    auto args = batch;
    args.insert(args.end(), {"--max-steps", "6", "--verify-replicas-every", "1"});
    const auto job = cifar::testing::run_process(command(work.path(), dir, launch(ranks), args));
    ASSERT_EQ(job.exit_code, 0) << job.output;
    expect_replicas_verified_every_step(job.output, ranks, 6);
    EXPECT_NE(job.output.find("[rank " + std::to_string(ranks - 1) + "]"), std::string::npos)
        << job.output;
    const auto got = parameters_in(step_checkpoint(work.path() / dir, 6));
    expect_same_training(got, want);
    cifar::testing::expect_moved_from_initialisation(got);
  }
}

TEST(AllReduceJob, ThreeRanksOverlapAndNoOverlapGiveIdenticalParameters) {
  TempDir work;
  // Small buckets: several all-reduces per step, started during backward with overlap.
  const std::vector<std::string> args = {"-b",
                                         "16",
                                         "--max-steps",
                                         "5",
                                         "--bucket-cap-mb",
                                         "1",
                                         "--first-bucket-mb",
                                         "0.1",
                                         "--verify-replicas-every",
                                         "1"};
  const auto overlap =
      cifar::testing::run_process(command(work.path(), "overlap", launch(3), args));
  ASSERT_EQ(overlap.exit_code, 0) << overlap.output;
  auto no_overlap_args = args;
  no_overlap_args.emplace_back("--no-overlap");
  const auto no_overlap =
      cifar::testing::run_process(command(work.path(), "no-overlap", launch(3), no_overlap_args));
  ASSERT_EQ(no_overlap.exit_code, 0) << no_overlap.output;
  expect_replicas_verified_every_step(overlap.output, 3, 5);
  expect_replicas_verified_every_step(no_overlap.output, 3, 5);
  EXPECT_NE(overlap.output.find("overlap on"), std::string::npos) << overlap.output;
  EXPECT_NE(no_overlap.output.find("overlap off"), std::string::npos) << no_overlap.output;
  const auto a = parameters_in(step_checkpoint(work.path() / "overlap", 5));
  const auto b = parameters_in(step_checkpoint(work.path() / "no-overlap", 5));
  for (const auto& [name, tensor] : a) EXPECT_TRUE(tensor.equal(b.at(name))) << name;
}

TEST(AllReduceJob, BatchNormBuffersStayIdenticalAcrossRanks) {
  TempDir work;
  // resnet20's BatchNorm running statistics are updated by each rank's forward from its own
  // batch; rank 0's are broadcast every step, so the check after each step passes.
  const auto job = cifar::testing::run_process(
      command(work.path(), "bn", launch(2),
              {"-m", "resnet20", "-b", "8", "--max-steps", "3", "--verify-replicas-every", "1"}));
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("model resnet20"), std::string::npos) << job.output;
  expect_replicas_verified_every_step(job.output, 2, 3);
}

// Two ranks started on their own, as pods are (logs rank0.log, rank1.log), training a long job.
struct TwoRanks {
  TwoRanks(const fs::path& work, const std::vector<std::string>& extra)
      : work_(work),
        port_(cifar::testing::free_port()),
        extra_(extra),
        rank0(args(0, extra), work / "rank0.log"),
        rank1(args(1, extra), work / "rank1.log") {}
  // Until rank 0 trains (its stop window open), and a moment more: mid-training.
  bool wait_until_training() {
    const bool training = cifar::testing::wait_for(
        [&] {
          return read_file(work_ / "rank0.log").find("trainable parameters") != std::string::npos;
        },
        60s);
    std::this_thread::sleep_for(2s);
    return training;
  }
  // Rank r's replacement, as a new pod runs it.
  [[nodiscard]] ChildProcess replacement(int r, const fs::path& log) const {
    return ChildProcess(args(r, extra_), log);
  }

 private:
  [[nodiscard]] std::vector<std::string> args(int r, std::vector<std::string> extra) const {
    extra.insert(extra.begin(), {"-b", "8", "-e", "50"});
    return command(work_, "model", rank_of_two(r, port_), extra);
  }
  fs::path work_;
  int port_;
  std::vector<std::string> extra_;

 public:
  ChildProcess rank0;
  ChildProcess rank1;
};

// A rank killed and never replaced: the rank left finds its collective broken, waits for a
// replacement up to --rendezvous-timeout, and then fails with a clear error.
TEST(AllReduceJob, AKilledRankNeverReplacedEndsTheOthersWithAClearErrorAtTheRendezvousTimeout) {
  TempDir work;
  TwoRanks ranks(work.path(), {"--dist-timeout", "20", "--rendezvous-timeout", "5"});
  ASSERT_TRUE(ranks.wait_until_training()) << read_file(work.path() / "rank0.log");
  auto& rank0 = ranks.rank0;
  auto& rank1 = ranks.rank1;
  rank1.kill_hard();
  const auto killed_at = std::chrono::steady_clock::now();
  const int code = rank0.wait();
  const auto took = std::chrono::steady_clock::now() - killed_at;
  const auto log = read_file(work.path() / "rank0.log");
  EXPECT_EQ(code, 1) << log;
  EXPECT_LT(took, 45s) << log;  // the collective's 20 s at most, then the rendezvous's 5
  EXPECT_NE(log.find(" failed (rank 0 of 2): another rank died or did not answer"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("(--dist-timeout 20 s); waiting up to 5 s"), std::string::npos) << log;
  EXPECT_NE(log.find("waiting up to 5 s for the group to form again"), std::string::npos) << log;
  EXPECT_NE(log.find("no group formed"), std::string::npos) << log;
  EXPECT_NE(log.find("1 of 2 ranks joined round 1"), std::string::npos) << log;
}

// The step a rank that was asked to stop says it stopped after (-1 when it says nothing).
int64_t stopped_after_step(const std::string& log) {
  const std::string said = "stopped on request: ";
  const auto at = log.find(said);
  if (at == std::string::npos) return -1;
  const auto steps = log.find(" epochs, ", at) + 9;
  return std::stoll(log.substr(steps));
}

// The step a rank says it resumed at after it waited for the group (-1 when it says nothing).
int64_t resumed_after_wait(const std::string& log) {
  const auto waited = log.find("for the group to form again");
  if (waited == std::string::npos) return -1;
  const auto at = log.find("resumed at step ", waited);
  return at == std::string::npos ? -1 : std::stoll(log.substr(at + 16));
}

// A drain evicts one rank's pod: that rank's SIGTERM reaches the other through the next step's
// stop-request all-reduce, both stop after the same step, and rank 0 saves it. The rank left
// does not exit (the kubelet would restart it in place, a restart charged to the job): it waits
// for the stopped rank's replacement and goes on with it from that step. Asked to stop itself
// while it waits, it exits at once, the state being saved.
TEST(AllReduceJob, ASigtermToOneRankStopsEveryRankAfterTheSameStepWithItSavedAndTheRestWait) {
  TempDir work;
  TwoRanks ranks(work.path(), {});
  ASSERT_TRUE(ranks.wait_until_training()) << read_file(work.path() / "rank0.log");
  auto& rank0 = ranks.rank0;
  ranks.rank1.send(SIGTERM);
  const int code1 = ranks.rank1.wait();
  const auto log1 = read_file(work.path() / "rank1.log");
  EXPECT_EQ(code1, 3) << log1;  // contract::kExitStopped
  const auto step = stopped_after_step(log1);
  ASSERT_GT(step, 0) << log1;
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] { return read_file(work.path() / "rank0.log").find("form again") != std::string::npos; },
      30s))
      << read_file(work.path() / "rank0.log");
  auto log0 = read_file(work.path() / "rank0.log");
  EXPECT_NE(log0.find("another rank was asked to stop"), std::string::npos) << log0;
  EXPECT_NE(log0.find("stopped after step " + std::to_string(step) + " with it saved"),
            std::string::npos)
      << log0;
  EXPECT_TRUE(fs::exists(step_checkpoint(work.path() / "model", static_cast<int>(step)))) << log0;

  // The replacement joins, and both go on from the saved step.
  auto replacement = ranks.replacement(1, work.path() / "replacement1.log");
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] { return resumed_after_wait(read_file(work.path() / "rank0.log")) >= 0; }, 60s))
      << read_file(work.path() / "rank0.log");
  log0 = read_file(work.path() / "rank0.log");
  EXPECT_EQ(resumed_after_wait(log0), step) << log0;

  // Stopped again through the replacement: rank 0 waits again, and a SIGTERM ends its wait.
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] {
        // Logged once its stop window is open (before it, a SIGTERM is an exit with nothing to
        // save).
        return read_file(work.path() / "replacement1.log").find("trainable parameters") !=
               std::string::npos;
      },
      30s));
  replacement.send(SIGTERM);
  EXPECT_EQ(replacement.wait(), 3) << read_file(work.path() / "replacement1.log");
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] {
        const auto log = read_file(work.path() / "rank0.log");
        return log.find("form again", log.find("form again") + 1) != std::string::npos;
      },
      30s))
      << read_file(work.path() / "rank0.log");
  rank0.send(SIGTERM);
  EXPECT_EQ(rank0.wait(), 3) << read_file(work.path() / "rank0.log");
  EXPECT_NE(read_file(work.path() / "rank0.log").find("asked to stop while it waited"),
            std::string::npos)
      << read_file(work.path() / "rank0.log");
}

// A rank that stopped because another was asked to, and is asked itself moments later (as both
// pods of a suspended job are, by two kubelets), stops as asked whenever the request comes: while
// it saves, while its run winds down, or while it waits for the group. It says that it stopped
// with the step saved and exits with contract::kExitStopped. Its stop window used to close
// before the run's teardown (the metrics server's took 2 s), which made a SIGTERM then an exit
// with 143 and nothing said: a CI run's suspend of a 2-rank job lost its chief's last lines so.
TEST(AllReduceJob, ARankAskedToStopWhileItWindsDownFromAnotherRanksStopSaysSoAndExitsStopped) {
  TempDir work;
  TwoRanks ranks(work.path(), {"--metrics-port", "0"});  // a server each, on a port of its own
  ASSERT_TRUE(ranks.wait_until_training()) << read_file(work.path() / "rank0.log");
  ranks.rank1.send(SIGTERM);
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] {
        return read_file(work.path() / "rank0.log").find("stopping too") != std::string::npos;
      },
      30s))
      << read_file(work.path() / "rank0.log");
  std::this_thread::sleep_for(100ms);  // about when the step is saved, here
  ranks.rank0.send(SIGTERM);
  const int code0 = ranks.rank0.wait();
  const auto log0 = read_file(work.path() / "rank0.log");
  EXPECT_EQ(code0, 3) << log0;  // contract::kExitStopped, not 128 + SIGTERM
  const auto step = stopped_after_step(log0);
  EXPECT_GT(step, 0) << log0;
  EXPECT_NE(log0.find("exiting"), std::string::npos) << log0;
  EXPECT_EQ(ranks.rank1.wait(), 3) << read_file(work.path() / "rank1.log");
  EXPECT_EQ(stopped_after_step(read_file(work.path() / "rank1.log")), step);
  EXPECT_TRUE(fs::exists(step_checkpoint(work.path() / "model", static_cast<int>(step)))) << log0;
}

// A rank asked to stop whose peer dies before the ranks could agree on it (a node drained and
// lost at once) has nothing more to save and no group to wait for: it ends at once, saying so,
// instead of waiting out --rendezvous-timeout (or its grace period) for a group. The peer is
// frozen first, so that the ranks cannot agree before it dies.
TEST(AllReduceJob, ARankAskedToStopThatLosesItsPeerFirstEndsWithoutWaitingForAGroup) {
  TempDir work;
  TwoRanks ranks(work.path(), {"--rendezvous-timeout", "300"});
  ASSERT_TRUE(ranks.wait_until_training()) << read_file(work.path() / "rank0.log");
  ranks.rank1.send(SIGSTOP);
  ranks.rank0.send(SIGTERM);
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] {
        return read_file(work.path() / "rank0.log").find("stop requested") != std::string::npos;
      },
      30s));
  std::this_thread::sleep_for(300ms);  // rank 0 waits in a collective for the frozen rank 1
  ranks.rank1.kill_hard();
  ASSERT_TRUE(cifar::testing::wait_for([&] { return !ranks.rank0.running(); }, 90s))
      << "rank 0 still waits: " << read_file(work.path() / "rank0.log");
  const auto log = read_file(work.path() / "rank0.log");
  EXPECT_EQ(ranks.rank0.wait(), 1) << log;  // failed: the steps since the checkpoint are lost
  EXPECT_NE(log.find("asked to stop, and a peer was lost first"), std::string::npos) << log;
}

// A rank frozen (SIGSTOP: alive, not training) under a collective timeout far longer than the
// stall limit, so that only the stall watchdog can see it: the other rank reports the stall, with
// the all-reduce it waits in and for whom, its stack in that call, and a one-line summary in its
// termination message; the frozen rank thawed, training goes on and the watchdog says so.
TEST(AllReduceJob, ARankFrozenUnderALongCollectiveTimeoutIsReportedStalledByTheOther) {
  TempDir work;
  const auto termination = work.path() / "termination-log";
  TwoRanks ranks(work.path(), {"--dist-timeout", "600", "--stall-seconds", "4", "--termination-log",
                               termination.string()});
  ASSERT_TRUE(ranks.wait_until_training()) << read_file(work.path() / "rank0.log");
  const auto before = read_file(work.path() / "rank0.log").size();
  EXPECT_EQ(read_file(work.path() / "rank0.log").find("stall report"), std::string::npos);
  ranks.rank1.send(SIGSTOP);
  const auto frozen = std::chrono::steady_clock::now();
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] {
        return read_file(work.path() / "rank0.log").find("stall report: rank 0", before) !=
               std::string::npos;
      },
      60s))
      << read_file(work.path() / "rank0.log");
  const double detected =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen).count();
  std::cout << "stall reported " << detected << " s after the rank froze\n";
  const auto log = read_file(work.path() / "rank0.log").substr(before);
  // Rank 1 froze somewhere in a step: rank 0 waits in one of the step's collectives for it.
  EXPECT_NE(log.find("waiting on (oldest first):\n  "), std::string::npos) << log;
  EXPECT_NE(log.find(" with rank 0's group: the other rank, for "), std::string::npos) << log;
  EXPECT_NE(log.find("cifar::allreduce::"), std::string::npos) << log;  // the main thread's stack
  const auto summary = read_file(termination);
  EXPECT_NE(summary.find("stalled: no progress for "), std::string::npos) << summary;
  EXPECT_NE(summary.find(" with rank 0's group: the other rank for "), std::string::npos)
      << summary;
  EXPECT_EQ(read_file(work.path() / "rank1.log").find("stall report"), std::string::npos);
  ranks.rank1.send(SIGCONT);
  EXPECT_TRUE(cifar::testing::wait_for(
      [&] {
        return read_file(work.path() / "rank0.log").find("progressing again") != std::string::npos;
      },
      60s))
      << read_file(work.path() / "rank0.log");
  const auto reports = read_file(work.path() / "rank0.log").find("stall report: rank 0");
  EXPECT_EQ(read_file(work.path() / "rank0.log").find("stall report: rank 0", reports + 1),
            std::string::npos);  // one report for one stall
}

TEST(AllReduceJob, ResumedJobEndsWhereAnUninterruptedOneDoes) {
  TempDir work;
  const auto whole = cifar::testing::run_process(
      command(work.path(), "whole", launch(2), {"-b", "16", "--max-steps", "8"}));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const auto first = cifar::testing::run_process(
      command(work.path(), "resumed", launch(2), {"-b", "16", "--max-steps", "3"}));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto rest = cifar::testing::run_process(
      command(work.path(), "resumed", launch(2), {"-b", "16", "--max-steps", "8", "--resume"}));
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  expect_same_training(parameters_in(step_checkpoint(work.path() / "resumed", 8)),
                       parameters_in(step_checkpoint(work.path() / "whole", 8)));
}

// The newest checkpoint's step in `dir` (-1 if none).
int newest_step(const fs::path& dir) {
  int newest = -1;
  std::error_code error;
  for (const auto& file : fs::directory_iterator(dir, error)) {
    const auto name = file.path().filename().string();
    if (name.rfind("alexnet-step-", 0) == 0 && file.path().extension() == ".pt") {
      newest = std::max(newest, std::stoi(name.substr(13)));
    }
  }
  return newest;
}

// What a lost pod does to an all-reduce job on Kubernetes: rank 1 dies after the first
// checkpoint, and its replacement starts; rank 0, whose collective broke, waits for it inside its
// process (rendezvous.h) instead of exiting. Later rank 0 dies, the store's host, and rank 1 waits
// for its replacement the same way, at a new store. Each time the ranks continue from the newest
// step one of them holds, the same step on every rank with bit-identical replicas, and the job ends
// where an uninterrupted one does, training no epoch twice.
TEST(AllReduceJob, ALostRanksReplacementJoinsTheRankLeftInsideItsProcess) {
  TempDir work;
  const std::vector<std::string> args = {"-b",
                                         "16",
                                         "-e",
                                         "4",
                                         "--checkpoint-every",
                                         "4",
                                         "--verify-replicas-every",
                                         "1",
                                         "--dist-timeout",
                                         "20"};
  const auto whole = cifar::testing::run_process(command(work.path(), "whole", launch(2), args));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const int port = cifar::testing::free_port();
  auto rank = [&](int r) { return command(work.path(), "restarted", rank_of_two(r, port), args); };
  const auto dir = work.path() / "restarted";
  ChildProcess rank0(rank(0), work.path() / "rank0.log");
  auto rank1 = std::make_unique<ChildProcess>(rank(1), work.path() / "rank1.log");
  ASSERT_TRUE(cifar::testing::wait_for([&] { return newest_step(dir) >= 4; }, 120s))
      << read_file(work.path() / "rank0.log");
  rank1->kill_hard();
  rank1.reset();
  ChildProcess replacement1(rank(1), work.path() / "replacement1.log");
  ASSERT_TRUE(cifar::testing::wait_for([&] { return newest_step(dir) >= 36; }, 120s))
      << read_file(work.path() / "rank0.log");
  rank0.kill_hard();
  EXPECT_EQ(rank0.wait(), -SIGKILL) << read_file(work.path() / "rank0.log");
  ChildProcess replacement0(rank(0), work.path() / "replacement0.log");
  EXPECT_EQ(replacement0.wait(), 0) << read_file(work.path() / "replacement0.log");
  EXPECT_EQ(replacement1.wait(), 0) << read_file(work.path() / "replacement1.log");

  // The ranks left waited in their process, and went on with their peer from the steps they had
  // completed, handed over from memory (a checkpoint would lose the steps since it): rank 0 its
  // own; after rank 0 was lost, rank 1 handed its state to rank 0's new process.
  const auto log0 = read_file(work.path() / "rank0.log");
  const auto log1 = read_file(work.path() / "replacement1.log");
  const auto log0_again = read_file(work.path() / "replacement0.log");
  EXPECT_GE(resumed_after_wait(log0), 4) << log0;
  EXPECT_NE(log0.find("holding the state of every step it completed"), std::string::npos) << log0;
  EXPECT_NE(log0.find("from rank 0's memory (no checkpoint read)"), std::string::npos) << log0;
  EXPECT_GE(resumed_after_wait(log1), 36) << log1;
  EXPECT_NE(log1.find("from rank 1's memory (no checkpoint read)"), std::string::npos) << log1;
  EXPECT_NE(log0_again.find("from rank 1's memory (no checkpoint read)"), std::string::npos)
      << log0_again;
  EXPECT_NE(log1.find("of round 0 via"), std::string::npos) << log1;  // the new store's first
  expect_same_training(parameters_in(step_checkpoint(dir, 72)),
                       parameters_in(step_checkpoint(work.path() / "whole", 72)));
  // monitor.jsonl: each epoch once, in order.
  EXPECT_EQ(recorded_epochs(dir), (std::vector<int>{1, 2, 3, 4}))
      << read_file(dir / "monitor.jsonl");
}

// The generations an elastic job's chiefs claimed the run's fence with, in a rank's log.
std::vector<int64_t> fence_generations_in(const std::string& log) {
  std::vector<int64_t> generations;
  const std::string said = "holds the run's fence as generation ";
  for (auto at = log.find(said); at != std::string::npos; at = log.find(said, at + 1)) {
    generations.push_back(std::stoll(log.substr(at + said.size())));
  }
  return generations;
}

// An elastic job (--min-ranks 2, at most 3 ranks) meeting at a store of its own, its processes
// numbered as an operator's pods are (CIFAR_INCARNATION): its chief, rank 0 of the first round,
// frozen (SIGSTOP: its connections stay open, so Gloo alone would wait out the 120 s collective
// timeout); the two left go on once it stopped beating at the store, from the step they hold,
// their new rank 0 the chief, which takes the run's fence from the frozen one. The frozen one,
// continued, writes nothing as the chief and joins them at a step boundary, as a rank started
// later does; then one rank is asked to stop (a scale-down) and the others go on. Each world
// trains its share of the same global batch, every epoch is recorded once, and the job ends at
// the step a fixed job would.
TEST(AllReduceJob, AnElasticJobGoesOnWithoutItsFrozenChiefAndTakesItBackAsARank) {
  TempDir work;
  const int port = cifar::testing::free_port();
  ChildProcess store({CIFAR_TRAIN_BIN, "rendezvous-store", "--port", std::to_string(port)},
                     work.path() / "store.log");
  const std::vector<std::string> args = {"-b",
                                         "8",
                                         "-e",
                                         "5",
                                         "--min-ranks",
                                         "2",
                                         "--rendezvous-settle",
                                         "1",
                                         "--verify-replicas-every",
                                         "1",
                                         "--dist-timeout",
                                         "120"};
  const auto dir = work.path() / "elastic";
  const auto rank = [&](int r) {
    auto pod = rank_of(r, 3, port);
    pod.insert(pod.begin() + 1, std::string(cifar::contract::env::kIncarnation) + "=1");
    return command(work.path(), "elastic", pod, args);
  };
  const auto log = [&](int slot) { return work.path() / (std::to_string(slot) + ".log"); };
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  ranks.reserve(3);
  for (int r = 0; r < 3; ++r) ranks.push_back(std::make_unique<ChildProcess>(rank(r), log(r)));
  // 576 samples, a global batch of 24: 24 steps an epoch.
  ASSERT_TRUE(cifar::testing::wait_for([&] { return newest_step(dir) >= 24; }, 120s))
      << read_file(log(0));
  // The chief is rank 0 of the first round, the first slot to join it.
  int chief = 0;
  while (chief < 3 && read_file(log(chief)).find("rank 0 of 3: gloo") == std::string::npos) ++chief;
  ASSERT_LT(chief, 3) << read_file(log(0));
  const int staying = chief == 0 ? 1 : 0;
  const int leaving = 3 - chief - staying;
  ranks[chief]->send(SIGSTOP);
  const auto regrouped = [&](const std::filesystem::path& file, const std::string& world) {
    const auto text = read_file(file);
    const auto from = text.find(world);
    return from != std::string::npos && text.find("resumed at step", from) != std::string::npos;
  };
  // Well within the collective timeout: found by its silence.
  ASSERT_TRUE(cifar::testing::wait_for([&] { return regrouped(log(staying), " of 2: gloo"); }, 60s))
      << read_file(log(staying));
  // (Its rank is the order it joined in, whichever slot it is.)
  EXPECT_NE(read_file(log(staying)).find(" of 3 has not beaten at the rendezvous store for 1"),
            std::string::npos)
      << read_file(log(staying));
  // Whether `slot`'s newest group is one of 3 after the first round, and trains (its model line).
  const auto trains_in_a_later_round_of_3 = [&](int slot) {
    const auto text = read_file(log(slot));
    const std::string said = "gloo process group of round ";
    const auto newest_round = text.rfind(said);
    if (newest_round == std::string::npos) return false;
    const auto line_start = text.rfind('\n', newest_round) + 1;  // npos + 1 is 0
    return text.substr(line_start, newest_round - line_start).find(" of 3: ") !=
               std::string::npos &&
           std::stoll(text.substr(newest_round + said.size())) > 0 &&
           text.find("trainable parameters", newest_round) != std::string::npos;
  };
  // The frozen chief comes back. Its group went on without it, and a newer round's rank 0 holds
  // the run's fence: it writes nothing more as the chief, and joins the group as a rank that came
  // late does, at a step boundary (a rank started later, a replacement, joins the same way).
  const int lost_at = newest_step(dir);
  ranks[chief]->send(SIGCONT);
  ASSERT_TRUE(cifar::testing::wait_for([&] { return trains_in_a_later_round_of_3(chief); }, 90s))
      << read_file(log(chief)) << "---- the others:\n"
      << read_file(log(staying)) << read_file(log(leaving));
  // A scale-down: one slot asked to stop leaves at a step boundary, and the others go on without
  // it. Asked once its round of 3 trains (the model line), so that it leaves a training group.
  ASSERT_TRUE(cifar::testing::wait_for([&] { return trains_in_a_later_round_of_3(leaving); }, 60s))
      << read_file(log(leaving));
  ranks[leaving]->send(SIGTERM);
  EXPECT_EQ(ranks[leaving]->wait(), 3) << read_file(log(leaving));  // contract::kExitStopped
  EXPECT_EQ(ranks[staying]->wait(), 0) << read_file(log(staying));
  EXPECT_EQ(ranks[chief]->wait(), 0) << read_file(log(chief));

  const auto stayed = read_file(log(staying));
  EXPECT_NE(stayed.find("memory (no checkpoint read)"), std::string::npos) << stayed;
  EXPECT_NE(stayed.find(
                "ranks wait to join, or the store moved on: the group of 2 forms again after step"),
            std::string::npos)
      << stayed;
  const auto came = read_file(log(chief));
  EXPECT_NE(came.find("closed before this rank came"), std::string::npos) << came;
  EXPECT_NE(came.find("memory (no checkpoint read)"), std::string::npos) << came;
  EXPECT_GE(resumed_after_wait(stayed), lost_at) << stayed;
  const auto after_stop = stayed.find("another rank was asked to stop");
  ASSERT_NE(after_stop, std::string::npos) << stayed;
  EXPECT_NE(stayed.find(" of 2: gloo", after_stop), std::string::npos) << stayed;
  // The chief moved with rank 0: the frozen one's claim, the first round's, is the lowest; each
  // later round's rank 0 claimed above every claim before (the frozen one too, if it was rank 0
  // again), and the newest claim holds the run's fence.
  const auto first_claims = fence_generations_in(read_file(log(chief)));
  ASSERT_FALSE(first_claims.empty()) << read_file(log(chief));
  std::vector<int64_t> claims;
  for (int slot = 0; slot < 3; ++slot) {
    const auto more = fence_generations_in(read_file(log(slot)));
    claims.insert(claims.end(), more.begin(), more.end());
  }
  EXPECT_GT(claims.size(), first_claims.size());
  EXPECT_EQ(*std::min_element(claims.begin(), claims.end()), first_claims.front());
  EXPECT_EQ(std::set<int64_t>(claims.begin(), claims.end()).size(), claims.size());
  const auto record = nlohmann::json::parse(read_file(dir / "alexnet.chief.fence"));
  EXPECT_EQ(record.at("incarnation").get<int64_t>(),
            *std::max_element(claims.begin(), claims.end()))
      << record.dump();
  // The job's length does not depend on its world: 5 epochs of 24 steps, each recorded once.
  EXPECT_EQ(newest_step(dir), 5 * 24);
  // Every epoch trained each of the 576 samples once, across the worlds of 3, 2 and 3 ranks and
  // the steps redone after a loss.
  EXPECT_EQ(epochs_not_training_each_sample_once(dir, 576), std::vector<nlohmann::json>{});
  EXPECT_EQ(recorded_epochs(dir), (std::vector<int>{1, 2, 3, 4, 5}))
      << read_file(dir / "monitor.jsonl");
}

// Slots 0 to 2 of an elastic job of 3 epochs (24 steps each) at the store at `port`, with
// --min-ranks `min_ranks` and a 120 s collective timeout, running `work`/elastic and logging to
// `work`/<slot>.log; returned once they trained the first epoch (or after 120 s).
std::vector<std::unique_ptr<ChildProcess>> three_elastic_ranks_an_epoch_in(const fs::path& work,
                                                                           int port, int min_ranks,
                                                                           int settle_seconds) {
  const std::vector<std::string> args = {"-b",
                                         "8",
                                         "-e",
                                         "3",
                                         "--min-ranks",
                                         std::to_string(min_ranks),
                                         "--rendezvous-settle",
                                         std::to_string(settle_seconds),
                                         "--dist-timeout",
                                         "120"};
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  ranks.reserve(3);
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(std::make_unique<ChildProcess>(
        command(work, "elastic", rank_of(r, 3, port), args), work / (std::to_string(r) + ".log")));
  }
  EXPECT_TRUE(cifar::testing::wait_for([&] { return newest_step(work / "elastic") >= 24; }, 120s))
      << read_file(work / "0.log");
  return ranks;
}

// An elastic job whose store and one rank are lost together (a node that died with both, on
// Kubernetes): a rank frozen (SIGSTOP: its connections stay open, so a collective with it never
// ends), the store killed and a new one started at the same address (the store pod's
// replacement). The ranks left learn from the new store's id that their group is of a store that
// is gone, and form a group of 2 there at once, rather than after the new store has seen the
// frozen rank silent for 10 s; they finish the job.
TEST(AllReduceJob, AnElasticJobWhoseStoreAndARankAreLostFormsAgainAtTheNewStoreAtOnce) {
  TempDir work;
  const int port = cifar::testing::free_port();
  const std::vector<std::string> store_command = {CIFAR_TRAIN_BIN, "rendezvous-store", "--port",
                                                  std::to_string(port)};
  auto store = std::make_unique<ChildProcess>(store_command, work.path() / "store.log");
  const auto dir = work.path() / "elastic";
  const auto log = [&](int slot) { return work.path() / (std::to_string(slot) + ".log"); };
  auto ranks = three_elastic_ranks_an_epoch_in(work.path(), port, /*min_ranks=*/2,
                                               /*settle_seconds=*/1);
  ASSERT_GE(newest_step(dir), 24);
  ranks[2]->send(SIGSTOP);
  store->send(SIGKILL);
  store->wait();
  store = std::make_unique<ChildProcess>(store_command, work.path() / "store2.log");
  for (int slot = 0; slot < 2; ++slot) {
    EXPECT_EQ(ranks[slot]->wait(), 0) << read_file(log(slot));
    const auto text = read_file(log(slot));
    EXPECT_NE(text.find("is a new one (restarted), which the group did not form at"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("has not beaten at the rendezvous store"), std::string::npos) << text;
    EXPECT_NE(text.find(" of 2: gloo"), std::string::npos) << text;
  }
  ranks[2]->send(SIGKILL);
  ranks[2]->wait();
  EXPECT_EQ(newest_step(dir), 3 * 24);
}

// A scale-down of an elastic job from 3 ranks to 1: the two ranks leaving are asked to stop one
// after the other, the second as the group forms again without the first, so that its stop comes
// while it waits in the next round. It leaves that round (before it closed: the rank left forms a
// group of 1 in the next; after: it leaves at the group's first step boundary), and the rank left
// trains on alone well within the collective timeout (120 s), which it would otherwise wait out
// for a rank that is gone. Every step is trained, each epoch recorded once.
TEST(AllReduceJob, AnElasticJobWhoseRanksLeaveOneAfterTheOtherGoesOnWithTheRankLeftAtOnce) {
  TempDir work;
  const int port = cifar::testing::free_port();
  ChildProcess store({CIFAR_TRAIN_BIN, "rendezvous-store", "--port", std::to_string(port)},
                     work.path() / "store.log");
  const auto dir = work.path() / "elastic";
  const auto log = [&](int slot) { return work.path() / (std::to_string(slot) + ".log"); };
  auto ranks = three_elastic_ranks_an_epoch_in(work.path(), port, /*min_ranks=*/1,
                                               /*settle_seconds=*/2);
  ASSERT_GE(newest_step(dir), 24);
  ranks[1]->send(SIGTERM);
  const std::string regrouping = "a rank left after step";
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] { return read_file(log(2)).find(regrouping) != std::string::npos; }, 60s))
      << read_file(log(2));
  ranks[2]->send(SIGTERM);
  const auto asked = std::chrono::steady_clock::now();
  const auto alone = [&] {
    const auto text = read_file(log(0));
    const auto group = text.find(" of 1: gloo");
    return group != std::string::npos && text.find("resumed at step", group) != std::string::npos;
  };
  ASSERT_TRUE(cifar::testing::wait_for(alone, 100s)) << read_file(log(0));
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 60s) << read_file(log(0));
  EXPECT_EQ(ranks[1]->wait(), 3) << read_file(log(1));  // contract::kExitStopped
  EXPECT_EQ(ranks[2]->wait(), 3) << read_file(log(2));
  EXPECT_EQ(ranks[0]->wait(), 0) << read_file(log(0));
  // It left the rendezvous one of three ways, by when the stop came: in a round, as a round
  // closed with it, or before it joined the next round (a loaded machine's timing).
  const auto second = read_file(log(2));
  EXPECT_TRUE(second.find("left round") != std::string::npos ||
              second.find("asked to leave as round") != std::string::npos ||
              second.find("left before it joined") != std::string::npos)
      << second;
  EXPECT_EQ(read_file(log(0)).find("has not beaten at the rendezvous store"), std::string::npos)
      << read_file(log(0));
  EXPECT_EQ(epochs_not_training_each_sample_once(dir, 576), std::vector<nlohmann::json>{});
  EXPECT_EQ(newest_step(dir), 3 * 24);
  EXPECT_EQ(recorded_epochs(dir), (std::vector<int>{1, 2, 3})) << read_file(dir / "monitor.jsonl");
}

// The rank processes `launch` started (its children but the rendezvous store).
std::vector<pid_t> ranks_launched_by(pid_t launch) {
  const auto of = [](pid_t pid) { return "/proc/" + std::to_string(pid); };
  std::istringstream children(
      read_file(of(launch) + "/task/" + std::to_string(launch) + "/children"));
  std::vector<pid_t> ranks;
  for (pid_t child = 0; children >> child;) {
    if (read_file(of(child) + "/cmdline").find("rendezvous-store") == std::string::npos) {
      ranks.push_back(child);
    }
  }
  return ranks;
}

// `cifar-train launch` of an elastic job (--min-ranks 2, at most 3 ranks), whose store is a child
// of its own: a rank SIGKILLed mid-run (as the OOM killer does). The two left stay in their
// processes, launch starts the rank again, and it joins them, handed their state from memory; the
// job ends 0 at the step a fixed job would, each epoch recorded once and each sample trained once
// an epoch.
TEST(AllReduceJob, AnElasticLaunchStartsAKilledRankAgainAndTheOthersHandItTheirState) {
  TempDir work;
  auto launcher = launch(3);
  launcher.insert(launcher.end(), {"--max-restarts", "1"});
  const auto dir = work.path() / "elastic";
  const auto log = work.path() / "job.log";
  // 576 samples, a global batch of 24: 24 steps an epoch; 5 epochs, so that the rank started
  // again has time to start (its process and torch) while the two left train on.
  constexpr int kEpochs = 5;
  ChildProcess job(command(work.path(), "elastic", launcher,
                           {"-b", "8", "-e", std::to_string(kEpochs), "--min-ranks", "2",
                            "--rendezvous-settle", "1"}),
                   log);
  // The latest round the job's log shows with all 3 ranks (-1: none yet).
  const auto latest_round_of_3 = [&] {
    const auto text = read_file(log);
    std::smatch round;
    int64_t latest = -1;
    for (auto from = text.cbegin(); std::regex_search(
             from, text.cend(), round, std::regex(" of 3: gloo process group of round (\\d+)"));
         from = round.suffix().first) {
      latest = std::max<int64_t>(latest, std::stoll(round[1].str()));
    }
    return latest;
  };
  // The kill once all three train together past the first epoch: under load one rank may start
  // after the first round formed with two and join at a later step boundary.
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] { return newest_step(dir) >= 24 && latest_round_of_3() >= 0; }, 120s))
      << read_file(log);
  const auto round_of_3_before_the_kill = latest_round_of_3();
  const auto ranks = ranks_launched_by(job.pid());
  ASSERT_EQ(ranks.size(), 3U) << read_file(log);
  ::kill(ranks[1], SIGKILL);
  EXPECT_EQ(job.wait(), 0) << read_file(log);

  const auto text = read_file(log);
  EXPECT_TRUE(std::regex_search(
      text, std::regex("rank [0-2] exited with 137; the others train on, and it starts again \\(0 "
                       "restarts left\\)")))
      << text;
  // The others went on in their processes: launch started none of them again.
  EXPECT_EQ(text.find("exited with"), text.rfind("exited with")) << text;
  // A round of 3 after the kill: the rank started again among them (as they regrouped, or at a
  // step boundary of the two), handed their state from memory.
  EXPECT_GT(latest_round_of_3(), round_of_3_before_the_kill) << text;
  EXPECT_NE(text.find("memory (no checkpoint read)"), std::string::npos) << text;
  EXPECT_EQ(newest_step(dir), kEpochs * 24);
  EXPECT_EQ(recorded_epochs(dir), (std::vector<int>{1, 2, 3, 4, 5}))
      << read_file(dir / "monitor.jsonl");
  EXPECT_EQ(epochs_not_training_each_sample_once(dir, 576), std::vector<nlohmann::json>{});
}

// An all-reduce job of two ranks checkpointing every 4 steps into a bucket of a store of the
// test's own (whose endpoint and keys the ranks inherit), started; `more`: flags besides.
struct AllReduceOnOwnStore {
  // Training into a 60 s outage that begins at the third checkpoint (it may end inside it: the last
  // save waits for the store), or through it on a slow day.
  static constexpr int kEpochs = 10;
  AllReduceOnOwnStore(const std::filesystem::path& work, const std::vector<std::string>& more = {})
      : store(work / "store"),
        exported((store.access().export_environment(), true)),
        run(std::string("s3://") + cifar::testing::ObjectStore::kBucket + "/" +
            cifar::testing::unique_prefix("allreduce-outage")),
        log_file(work / "job.log"),
        job(command(work, "unused", launch(2), flags(run, more)), log_file),
        checkpoints(run, "simplecnn", 3) {}
  static std::vector<std::string> flags(const std::string& run,
                                        const std::vector<std::string>& more) {
    std::vector<std::string> all = {"-md",
                                    run,
                                    "-m",
                                    "simplecnn",
                                    "-b",
                                    "16",
                                    "-e",
                                    std::to_string(kEpochs),
                                    "--checkpoint-every",
                                    "4",
                                    "--progress",
                                    "lines"};
    all.insert(all.end(), more.begin(), more.end());
    return all;
  }
  // Until rank 0's first `count` checkpoints are in the bucket: the newest one's step.
  int64_t wait_for_checkpoints(size_t count = 1) {
    EXPECT_TRUE(cifar::testing::wait_for([&] { return checkpoints.list().size() >= count; }, 120s))
        << read_file(log_file);
    const auto names = checkpoints.list();
    return names.empty() ? -1 : checkpoints.state_of(names.back()).step;
  }

  // The job ended as if nothing had happened: exit 0, every step trained, the final checkpoint
  // and those before it in the bucket (pruned after the outage too); the outage in the log.
  void expect_the_outage_ridden_out(int64_t saved_before) {
    EXPECT_EQ(job.wait(), 0) << read_file(log_file);
    const auto log = read_file(log_file);
    EXPECT_NE(log.find("did not answer"), std::string::npos) << log;
    EXPECT_NE(log.find("answers again after"), std::string::npos) << log;
    const auto done = storage::open_store(run)->get("simplecnn.done");
    ASSERT_TRUE(done);
    const auto final_step = nlohmann::json::parse(*done).at("step").get<int64_t>();
    EXPECT_EQ(final_step, kEpochs * (576 / 32));
    EXPECT_GT(final_step, saved_before);
    const auto names = checkpoints.list();
    ASSERT_EQ(names.size(), 3U);
    EXPECT_EQ(checkpoints.state_of(names.back()).step, final_step);
  }

  cifar::testing::OwnObjectStore store;
  bool exported;
  std::string run;
  std::filesystem::path log_file;
  ChildProcess job;
  const train::CheckpointManager checkpoints;
};

// The store away for 60 s mid-run: restarting (a failover: connections refused) or frozen
// (SIGSTOP, a pause: connections accepted, nothing answered). Rank 0 trains on with its newest
// checkpoint waiting (perhaps to its last step, whose save then waits for the store), the job
// ends with no rank restarted, and every checkpoint after the outage is in the bucket.
void away_for_60_seconds(cifar::testing::StoreOutage outage) {
  TempDir work;
  AllReduceOnOwnStore on(work.path());
  // After the third, so that the rotation has one to prune after the outage even when the final
  // checkpoint is the only one saved after it.
  const auto saved_before = on.wait_for_checkpoints(3);
  on.store.begin(outage);
  std::this_thread::sleep_for(60s);
  on.store.end(outage);
  on.expect_the_outage_ridden_out(saved_before);
}

TEST(AllReduceJobStoreOutage, RefusingConnectionsFor60SecondsIsRiddenOutWithNoRestart) {
  away_for_60_seconds(cifar::testing::StoreOutage::kRefusing);
}

TEST(AllReduceJobStoreOutage, AStoreFrozenFor60SecondsIsRiddenOutWithNoRestart) {
  away_for_60_seconds(cifar::testing::StoreOutage::kFrozen);
}

// Away for longer than the job allows (--max-unsaved-seconds 10): rank 0 fails with the store's
// unavailability (exit 5, which the launcher passes on, stopping rank 1), naming the store, its
// last answer and the step last saved; what was saved stays.
TEST(AllReduceJobStoreOutage, AStoreAwayLongerThanTheBoundFailsTheJobSayingWhereAndTheStepSaved) {
  TempDir work;
  AllReduceOnOwnStore on(work.path(), {"--max-unsaved-seconds", "10"});
  const auto saved_before = on.wait_for_checkpoints();
  on.store.stop();
  EXPECT_EQ(on.job.wait(), 5) << read_file(on.log_file);
  const auto log = read_file(on.log_file);
  EXPECT_NE(log.find("checkpoint store " + on.run + " unavailable: "), std::string::npos) << log;
  EXPECT_NE(log.find("longer than the job allows (checkpoint.maxUnsavedSeconds, "
                     "--max-unsaved-seconds 10); last error: "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(on.store.access().endpoint), std::string::npos) << log;
  EXPECT_NE(log.find("the newest checkpoint saved is step "), std::string::npos) << log;
  on.store.start();
  const auto names = on.checkpoints.list();
  ASSERT_FALSE(names.empty());
  EXPECT_GE(on.checkpoints.state_of(names.back()).step, saved_before);  // nothing saved is lost
}

TEST(AllReduceJob, WithoutRanksItSaysHowToGetThem) {
  const auto result = cifar::testing::run_process({CIFAR_TRAIN_BIN, "--strategy", "allreduce"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("cifar-train launch -n N"), std::string::npos) << result.output;
}

// A --min-ranks that is no number is launch's usage error, before any process starts.
TEST(AllReduceJob, AnElasticLaunchWhoseMinRanksIsNoNumberIsRefused) {
  for (const auto& given : {std::vector<std::string>{"--min-ranks", "two"},
                            std::vector<std::string>{"--min-ranks=2x"}}) {
    auto args = launch(2);
    args.insert(args.end(), given.begin(), given.end());
    const auto result = cifar::testing::run_process(args);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find("cifar-train launch: --min-ranks "), std::string::npos)
        << result.output;
    EXPECT_NE(result.output.find(": not a whole number"), std::string::npos) << result.output;
    EXPECT_EQ(result.output.find("rendezvous-store: listening"), std::string::npos)
        << result.output;
  }
}

}  // namespace
}  // namespace cifar
