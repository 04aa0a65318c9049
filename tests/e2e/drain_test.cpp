// A node drained under a running job, as an administrator does it (`kubectl drain`: the node
// cordoned, the pods evicted through the eviction API, each with SIGTERM and its grace period).
// The job's pods there stop at a step boundary with that step saved, come back on the other node
// and continue from it: with checkpoints due once an epoch only, at most one step is lost. The
// drain selects the job's pods, so that the cases beside it (and the operator) keep theirs.
#include <gtest/gtest.h>

#include <thread>

#include "contract/labels.h"
#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

class Drains : public Cluster {
 protected:
  void TearDown() override {
    if (!drained_.empty()) kubectl({"uncordon", drained_});  // the next cases need both nodes
    Cluster::TearDown();
  }

  // Drains the node of `pod_name` of the pods of job `job`; returns the node.
  std::string drain_node_of(const std::string& job, const std::string& pod_name) {
    drained_ = placement(job).at(pod_name);
    const auto drained =
        kubectl({"drain", drained_, "--pod-selector", std::string(contract::label::kJobName) +
                                                          "=" + job,
                 "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s"});
    EXPECT_EQ(drained.exit_code, 0) << drained.output;
    return drained_;
  }
  // Until `pod_name` runs again, on another node than `drained`; then the node is uncordoned.
  bool wait_until_running_elsewhere(const std::string& job, const std::string& pod_name,
                                    const std::string& drained) {
    const bool moved = wait_for(
        [&] {
          const auto placed = placement(job);
          const auto at = placed.find(pod_name);
          return at != placed.end() && at->second != drained && phase(pod_name) == "Running";
        },
        seconds(120));
    kubectl({"uncordon", drained});
    drained_.clear();
    return moved;
  }

  std::string drained_;
};

TEST_F(Drains, ADrainOfAParameterServerJobsMasterNodeLosesAtMostAStep) {
  data_and_checkpoint_volumes();
  checkpoint_every_steps_ = 0;
  submit("psdrain", kPsAsync, kPsReplicas, "", "cifar10", kLongEnoughToInterrupt,
         kAsyncPsLearningRate);
  ASSERT_TRUE(wait_until_training("psdrain")) << diagnose("psdrain");
  const auto way_out = volumes_ / "psdrain-master-0.drained.log";
  auto follower = follow_log("psdrain-master-0", way_out);
  std::this_thread::sleep_for(seconds(1));  // following
  ASSERT_NE(state("psdrain"), "Succeeded") << "the job ended before the drain";
  const auto node = drain_node_of("psdrain", "psdrain-master-0");
  follower->wait();
  ASSERT_TRUE(wait_until_running_elsewhere("psdrain", "psdrain-master-0", node))
      << diagnose("psdrain");
  ASSERT_TRUE(wait_for_state("psdrain", "Succeeded", seconds(300))) << diagnose("psdrain");
  EXPECT_EQ(status_of("psdrain").value("restarts", -1), 0);  // an eviction is not a failure
  const auto master = kubectl({"logs", "psdrain-master-0", "-n", ns_}).output;
  const auto cost = interruption("kubectl drain of the node of a PS job's master (async, 1 PS)",
                                 cifar::testing::read_file(way_out), master);
  EXPECT_GT(cost.stopped_after, 0) << cifar::testing::read_file(way_out);
  EXPECT_GE(cost.resumed_from, cost.stopped_after - 1) << master;
}

TEST_F(Drains, ADrainOfAnAllReduceJobsRank1NodeLosesAtMostAStep) {
  data_and_checkpoint_volumes();
  checkpoint_every_steps_ = 0;
  submit("ardrain", kAllReduce, "    Worker: {replicas: 2}\n", "", "cifar10",
         kLongEnoughToInterrupt);
  ASSERT_TRUE(wait_until_training("ardrain")) << diagnose("ardrain");
  // Rank 0 stops with rank 1 (the stop rides on the next step's all-reduce) and saves the step.
  const auto way_out = volumes_ / "ardrain-worker-0.drained.log";
  auto follower = follow_log("ardrain-worker-0", way_out);
  std::this_thread::sleep_for(seconds(1));  // following
  ASSERT_NE(state("ardrain"), "Succeeded") << "the job ended before the drain";
  const auto node = drain_node_of("ardrain", "ardrain-worker-1");
  follower->wait();
  ASSERT_TRUE(wait_until_running_elsewhere("ardrain", "ardrain-worker-1", node))
      << diagnose("ardrain");
  ASSERT_TRUE(wait_for_state("ardrain", "Succeeded", seconds(300))) << diagnose("ardrain");
  const auto rank0 = kubectl({"logs", "ardrain-worker-0", "-n", ns_}).output;
  const auto cost = interruption("kubectl drain of the node of rank 1 of a 2-rank all-reduce job",
                                 cifar::testing::read_file(way_out), rank0);
  EXPECT_GT(cost.stopped_after, 0) << cifar::testing::read_file(way_out);
  EXPECT_GE(cost.resumed_from, cost.stopped_after - 1) << rank0;
  EXPECT_LE(cost.resumed_from, cost.stopped_after) << rank0;
}

}  // namespace
}  // namespace cifar::e2e
