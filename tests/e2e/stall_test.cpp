// Jobs whose trainers are alive but stop making progress (cifartrainjob/stall.h), made for real on
// the local cluster: a process stopped with SIGSTOP inside its pod, so that nothing crashes and no
// timeout of the job's own ends it (the all-reduce job's collective timeout is 10 minutes). Each
// case times the detection from the freeze to condition Stalled, checks that the condition names
// the pod that stopped and what the others wait on, and that runPolicy.onStall Restart replaced
// the right pods and the job succeeded from its newest checkpoint. A failing case prints the
// job's status, Events and pods' logs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>

#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

using Wall = std::chrono::steady_clock;

class Stalls : public Cluster {
 protected:
  static constexpr int kStallSeconds = 20;

  Stalls() { stalls_expected_ = true; }

  // The job's condition Stalled, or {} while it has none.
  json stalled_condition(const std::string& job) {
    for (const auto& c : status_of(job).value("conditions", json::array())) {
      if (c.value("type", "") == "Stalled") return c;
    }
    return json::object();
  }

  struct Stall {
    bool seen = false;
    double detected_after = 0;  // seconds from the freeze to condition Stalled
    std::string message;        // the condition's
  };

  // Submits `job` with runPolicy.onStall Restart (and `run_policy`'s more fields), lets it train
  // and save a checkpoint, then freezes `pod`'s process and times how long the operator takes to
  // say the job is Stalled.
  Stall submit_and_freeze(const std::string& job, const std::string& strategy,
                          const std::string& replicas, const std::string& run_policy,
                          const std::string& pod, int epochs = kLongEnoughToHalt) {
    data_and_checkpoint_volumes();
    submit(job, strategy, replicas,
           "  runPolicy: {stallTimeoutSeconds: " + std::to_string(kStallSeconds) +
               ", onStall: Restart" + run_policy + "}\n",
           "cifar10", epochs);
    if (!wait_until_training(job) || !wait_for_checkpoint(run_dir(job))) {
      ADD_FAILURE() << "no checkpoint before the fault" << diagnose(job);
      return {};
    }
    EXPECT_EQ(stalled_condition(job), json::object()) << "stalled before the fault";
    return freeze(job, pod);
  }

  // Freezes `pod`'s process and times how long the operator takes to say the job is Stalled.
  Stall freeze(const std::string& job, const std::string& pod) {
    const int pid = container_pid(pod);
    if (pid <= 0) {
      ADD_FAILURE() << "no process found in " << pod;
      return {};
    }
    const auto frozen_at = Wall::now();
    EXPECT_EQ(::kill(pid, SIGSTOP), 0);
    Stall stall;
    stall.seen = wait_for([&] { return stalled_condition(job).value("status", "") == "True"; },
                          seconds(180));
    EXPECT_TRUE(stall.seen) << diagnose(job);
    stall.detected_after = std::chrono::duration<double>(Wall::now() - frozen_at).count();
    stall.message = stalled_condition(job).value("message", "");
    return stall;
  }

  // The messages of the job's Events of `reason`, a line each.
  std::string events(const std::string& job, const std::string& reason = "TrainersStalled") {
    return kubectl({"get", "events", "-n", ns_, "--field-selector",
                    "involvedObject.name=" + job + ",reason=" + reason, "-o",
                    "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}"})
        .output;
  }

  // Until a Warning Event of the job says `replacing` ("replacing j-ps-0 (restart").
  bool replaced(const std::string& job, const std::string& replacing) {
    const bool seen =
        wait_for([&] { return events(job).find(replacing) != std::string::npos; }, seconds(60));
    EXPECT_TRUE(seen) << events(job) << diagnose(job);
    return seen;
  }

  // Waits for the Warning Event that says `replacing`, then for the job to succeed.
  void expect_replaced_then_succeeded(const std::string& job, const std::string& replacing) {
    ASSERT_TRUE(replaced(job, replacing));
    ASSERT_TRUE(wait_for_state(job, "Succeeded", seconds(400))) << diagnose(job);
  }
};

// Rank 1 of a 2-rank all-reduce job stopped mid-run, its collective timeout 600 s: only the stall
// rule sees it. Rank 0 reports itself stalled in the gradient all-reduce; rank 1 stops answering;
// the group is replaced and resumes from the newest checkpoint.
TEST_F(Stalls, ARankFrozenUnderALongCollectiveTimeoutIsDetectedAndTheGroupReplaced) {
  const auto stall = submit_and_freeze(
      "frozen", "  strategy: {type: AllReduce, allReduce: {backend: gloo, timeoutSeconds: 600}}\n",
      "    Worker: {replicas: 2}\n", "", "frozen-worker-1");
  ASSERT_TRUE(stall.seen);
  const auto newest = newest_checkpoint_step(run_dir("frozen"));
  const auto& message = stall.message;
  // Frozen after the scraper heard it, or before (its metrics come up ~2 s into the run).
  EXPECT_TRUE(message.find("frozen-worker-1 at step") != std::string::npos ||
              message.find("frozen-worker-1 [never answered in") != std::string::npos)
      << message;
  EXPECT_TRUE(message.find("[stopped answering") != std::string::npos ||
              message.find("[never answered in") != std::string::npos)
      << message;
  EXPECT_NE(message.find("frozen-worker-0 at step"), std::string::npos) << message;
  // Rank 0 waits for the frozen rank in one of a step's collectives: a gradient bucket's, the
  // sample tally's after them (rank 1 frozen once its buckets were sent, as it waited for rank
  // 0's), or the stop agreement's that ends the step.
  EXPECT_TRUE(message.find("waiting on gradient all-reduce") != std::string::npos ||
              message.find("waiting on sample-tally all-reduce") != std::string::npos ||
              message.find("waiting on stop-request all-reduce") != std::string::npos)
      << message;
  EXPECT_NE(message.find("with rank 0's group: the other rank for"), std::string::npos) << message;
  expect_replaced_then_succeeded("frozen", "replacing frozen-worker-0, frozen-worker-1");
  if (HasFatalFailure()) return;
  EXPECT_GE(status_of("frozen").value("restarts", 0), 1);
  const auto resumed =
      number_after(kubectl({"logs", "frozen-worker-0", "-n", ns_}).output, "resumed at step ", "");
  EXPECT_GE(resumed, static_cast<double>(newest)) << "resumed before the newest checkpoint";
  std::cerr << "stall | rank 1 of a 2-rank all-reduce job SIGSTOPped, stallTimeoutSeconds "
            << kStallSeconds << ", progress scraped every 5 s | Stalled after "
            << stall.detected_after << " s | group replaced, resumed at step " << resumed
            << " (newest checkpoint " << newest << ")\n";
  EXPECT_LE(stall.detected_after, kStallSeconds + 2 * 5 + 15)
      << "later than the limit and a scrape or two";
}

// The parameter server of a synchronous PS job stopped mid-run: both trainers report themselves
// stalled in their PS calls, the PS stops answering, and the PS alone is replaced (from the
// newest checkpoint), after which the trainers go on with it.
TEST_F(Stalls, AFrozenParameterServerIsDetectedAndReplacedAloneAndTheJobSucceeds) {
  const auto stall = submit_and_freeze(
      "psfrozen", kPsSync,
      "    PS: {replicas: 1}\n    Master: {replicas: 1}\n    Worker: {replicas: 1}\n",
      ", backoffLimit: 6",  // room for the trainers' own retries around the PS's replacement
      "psfrozen-ps-0");
  ASSERT_TRUE(stall.seen);
  const auto& message = stall.message;
  // The trainers' reports name the frozen PS: a call (push or pull) to one of its stripes.
  EXPECT_NE(message.find("with PS shard "), std::string::npos) << message;
  EXPECT_NE(message.find("(psfrozen-ps-0."), std::string::npos) << message;
  EXPECT_NE(message.find("psfrozen-ps-0 stopped answering"), std::string::npos) << message;
  expect_replaced_then_succeeded("psfrozen", "replacing psfrozen-ps-0 (restart");
  if (HasFatalFailure()) return;
  std::cerr << "stall | the PS of a sync PS job SIGSTOPped, stallTimeoutSeconds " << kStallSeconds
            << ", progress scraped every 5 s | Stalled after " << stall.detected_after
            << " s | PS replaced alone, job Succeeded\n";
  EXPECT_LE(stall.detected_after, kStallSeconds + 3 * 5 + 15)
      << "later than the limit and a few scrapes";
}

// A node where the job stalled twice is suspect: rank 1 frozen on its node, the group replaced
// (one rank a node: spreadAcrossNodes Required), then the rank on that node frozen again. The
// second stall marks the node suspect (status.suspectNodes, Event NodeSuspect) and the group's
// new pods all land on the other node; the job succeeds there.
TEST_F(Stalls, ASecondStallOnANodeMakesItSuspectAndTheGroupIsPlacedOffIt) {
  const std::string job = "twice";
  // Epochs enough that the replaced group still trains for a few scrapes when the first freeze
  // lands late (an epoch is ~5 s here): a CI run froze it after epoch 2 of 3, and the group ended
  // 3 s after its replacement, before any scrape heard it train.
  constexpr int kEpochs = 7;
  const auto first = submit_and_freeze(
      job, "  strategy: {type: AllReduce, allReduce: {backend: gloo, timeoutSeconds: 600}}\n",
      "    Worker: {replicas: 2}\n",
      ", backoffLimit: 6, schedulingPolicy: {spreadAcrossNodes: Required}", job + "-worker-1",
      kEpochs);
  ASSERT_TRUE(first.seen);
  const auto node = placement(job)[job + "-worker-1"];
  ASSERT_FALSE(node.empty());
  ASSERT_TRUE(replaced(job, "(restart 1)"));
  // The new group trains, one rank on `node` again: the condition turned False (a trainer answers
  // unstalled) and the job's step moved past where it stood at the replacement. Frozen before its
  // first step, a rank would hold the other in its start-up floor (300 s), not in the limit.
  const auto step = [&] {
    return status_of(job).value("progress", json::object()).value("step", int64_t{0});
  };
  const auto replaced_at_step = step();
  ASSERT_TRUE(wait_for(
      [&] {
        return stalled_condition(job).value("status", "") == "False" && step() > replaced_at_step;
      },
      seconds(180)))
      << diagnose(job);
  EXPECT_EQ(status_of(job).value("stallsByNode", json::object()), json({{node, 1}}));
  std::string on_node;
  for (const auto& [name, its_node] : placement(job)) {
    if (its_node == node) on_node = name;
  }
  ASSERT_FALSE(on_node.empty()) << "no rank on " << node << diagnose(job);
  const auto second = freeze(job, on_node);
  ASSERT_TRUE(second.seen);
  ASSERT_TRUE(replaced(job, "(restart 2)"));
  EXPECT_NE(events(job, "NodeSuspect").find("node " + node + " is suspect"), std::string::npos)
      << events(job, "NodeSuspect");
  EXPECT_EQ(status_of(job).value("suspectNodes", json::array()), json::array({node}));
  // The third group: every rank off the suspect node, and the job ends there.
  ASSERT_TRUE(wait_for(
      [&] {
        const auto pods = pods_of(job);
        return pods.size() == 2 && std::all_of(pods.begin(), pods.end(), [&](const json& pod) {
                 const auto on = pod["spec"].value("nodeName", "");
                 return !on.empty() && on != node && !pod["metadata"].contains("deletionTimestamp");
               });
      },
      seconds(120)))
      << diagnose(job);
  ASSERT_TRUE(wait_for_state(job, "Succeeded", seconds(400))) << diagnose(job);
  std::cerr << "stall | rank frozen twice on " << node << ": Stalled after " << first.detected_after
            << " s and " << second.detected_after
            << " s | node suspect, the third group placed on the other node, job Succeeded\n";
}

// A dataset volume that stops answering: the CIFAR-10 slice seen through a FUSE mount (hangfs) in
// node 1's mount namespace, its reads made to wait from before the job starts, as a network
// filesystem's do when its server stops answering (stats and opens answer). The trainer hangs in
// its first read; the data is read whole at start, before any step, so its stall limit is the
// start-up floor whatever stallTimeoutSeconds says: here runPolicy.stallStartupSeconds, 60 s (the
// slice loads in a second; the default, 300 s, suits a job whose start-up is longer). The report
// names the read; once the job is Stalled the mount answers again, and the replaced trainer trains
// to Succeeded.
TEST_F(Stalls, ADatasetReadThatNeverReturnsIsFoundAtTheStartUpFloorAndTheJobRecovers) {
  constexpr int kStartupFloor = 60;
  const auto node_one = e2e_dir() / "cluster" / "node1";
  std::string node;
  std::ifstream(node_one / "name") >> node;
  ASSERT_FALSE(node.empty());
  const auto mountpoint = volumes_ / "hanging-cifar10";
  std::filesystem::create_directories(mountpoint);
  cifar::testing::ChildProcess hangfs({"nsenter", "--mount=" + (node_one / "mounts").string(),
                                       (tool_dir("hangfs") / "hangfs").string(),
                                       (e2e_dir() / "cifar10-slice").string(), mountpoint.string()},
                                      volumes_ / "hangfs.log");
  ASSERT_TRUE(wait_for(
      [&] {
        return cifar::testing::read_file(volumes_ / "hangfs.log").find("mounted") !=
               std::string::npos;
      },
      seconds(30)))
      << cifar::testing::read_file(volumes_ / "hangfs.log");
  // Unmounted whatever happens: lazily, as pods may still hold it.
  const auto unmount = [&] {
    hangfs.send(SIGUSR2);
    run_process({"nsenter", "--mount=" + (node_one / "mounts").string(), "umount", "-l",
                 mountpoint.string()});
    hangfs.send(SIGTERM);
  };
  struct Cleanup {
    std::function<void()> run;
    ~Cleanup() { run(); }
  } cleanup{unmount};
  hangfs.send(SIGUSR1);  // reads wait from now on

  data_and_checkpoint_volumes(mountpoint);
  const std::string job = "hungread";
  submit(job, kAllReduce,
         "    Worker:\n      replicas: 1\n      template: {spec: {nodeSelector: "
         "{kubernetes.io/hostname: " +
             node + "}}}\n",
         "  runPolicy: {stallTimeoutSeconds: " + std::to_string(kStallSeconds) +
             ", stallStartupSeconds: " + std::to_string(kStartupFloor) + ", onStall: Restart}\n");
  ASSERT_TRUE(wait_for_state(job, "Running", seconds(120))) << diagnose(job);
  const auto running_at = Wall::now();
  ASSERT_TRUE(
      wait_for([&] { return stalled_condition(job).value("status", "") == "True"; }, seconds(240)))
      << diagnose(job);
  const double detected = std::chrono::duration<double>(Wall::now() - running_at).count();
  const auto message = stalled_condition(job).value("message", "");
  EXPECT_NE(message.find(job + "-worker-0 at step 0 [stalled: no progress for"), std::string::npos)
      << message;
  EXPECT_NE(message.find("waiting on read of CIFAR-10 file "), std::string::npos) << message;
  // The read holds the main thread in the kernel, where no signal handler runs: /proc says where.
  EXPECT_NE(message.find("main thread held in the kernel: read"), std::string::npos) << message;
  hangfs.send(SIGUSR2);  // the mount answers again
  expect_replaced_then_succeeded(job, "replacing " + job + "-worker-0 (restart 1)");
  std::cerr << "stall | the dataset volume's reads hang from the start (FUSE), stallTimeoutSeconds "
            << kStallSeconds << ", stallStartupSeconds " << kStartupFloor << " | Stalled "
            << detected
            << " s after the job was Running | trainer replaced once the mount answered, job "
               "Succeeded\n";
  // Not at stallTimeoutSeconds (20 s): the floor holds until the first step (the trainer's clock
  // starts with its process, which may be a few seconds before the job is Running).
  EXPECT_GE(detected, kStartupFloor - 10) << "before the start-up floor";
  EXPECT_LE(detected, kStartupFloor + 2 * 5 + 15) << "later than the floor and a scrape or two";
}

}  // namespace
}  // namespace cifar::e2e
