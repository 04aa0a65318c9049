// A node drained under a running job, as an administrator does it (`kubectl drain`: the node
// cordoned, the pods evicted through the eviction API, each with SIGTERM and its grace period).
// The job's pods there stop at a step boundary with that step saved, come back on the other node
// and continue from it: with checkpoints due once an epoch only, at most one step is lost. The
// drain selects the job's pods, so that the cases beside it (and the operator) keep theirs.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>

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

  // The drain of the node of `pod_name`, of the pods of job `job` (kubectl drain returns once
  // they are evicted and gone), and the way back: until `pod_name` runs again on the other node;
  // then the drained node is uncordoned. (A pod that came back may have finished already: an
  // asynchronous PS job's workers train on while its master moves, and the master, back, ends it.)
  std::pair<std::function<void()>, std::function<void()>> drain_and_return(
      const std::string& job, const std::string& pod_name) {
    drained_ = placement(job).at(pod_name);
    auto drain = [this, job] {
      const auto drained = kubectl(
          {"drain", drained_, "--pod-selector", std::string(contract::label::kJobName) + "=" + job,
           "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s"});
      EXPECT_EQ(drained.exit_code, 0) << drained.output;
    };
    auto come_back = [this, job, pod_name] {
      EXPECT_TRUE(wait_for(
          [&] {
            const auto placed = placement(job);
            const auto at = placed.find(pod_name);
            const auto now = phase(pod_name);
            return at != placed.end() && at->second != drained_ &&
                   (now == "Running" || now == "Succeeded");
          },
          seconds(120)))
          << pod_name << " did not come back on the other node";
      kubectl({"uncordon", drained_});
      drained_.clear();
    };
    return {drain, come_back};
  }

  std::string drained_;
};

TEST_F(Drains, ADrainOfAParameterServerJobsMasterNodeLosesAtMostAStep) {
  data_and_checkpoint_volumes();
  checkpoint_every_steps_ = 0;
  submit("psdrain", kPsAsync, kPsReplicas, "", "cifar10", kLongEnoughToInterrupt,
         kAsyncPsLearningRate);
  ASSERT_TRUE(wait_until_training("psdrain")) << diagnose("psdrain");
  const auto [drain, come_back] = drain_and_return("psdrain", "psdrain-master-0");
  interrupt_and_finish("psdrain", "psdrain-master-0",
                       "kubectl drain of the node of a PS job's master (async, 1 PS)", drain,
                       come_back, Then::kStopAtTheResume);
  EXPECT_EQ(status_of("psdrain").value("restarts", -1), 0);  // an eviction is not a failure
}

TEST_F(Drains, ADrainOfAnAllReduceJobsRank1NodeLosesAtMostAStep) {
  data_and_checkpoint_volumes();
  checkpoint_every_steps_ = 0;
  // Spread: with both ranks on one node the drain would evict rank 0 too.
  submit("ardrain", kAllReduce, "    Worker: {replicas: 2}\n",
         "  runPolicy: {schedulingPolicy: {spreadAcrossNodes: Required}}\n", "cifar10",
         kLongEnoughToInterrupt);
  ASSERT_TRUE(wait_until_training("ardrain")) << diagnose("ardrain");
  // Rank 0 stops with rank 1 (the stop rides on the next step's all-reduce) and saves the step,
  // then waits inside its process for rank 1's replacement, which resumes there with it.
  const auto [drain, come_back] = drain_and_return("ardrain", "ardrain-worker-1");
  const auto cost =
      interrupt_and_finish("ardrain", "ardrain-worker-1",
                           "kubectl drain of the node of rank 1 of a 2-rank all-reduce job", drain,
                           come_back, Then::kStopAtTheResume);
  EXPECT_LE(cost.resumed_from, cost.stopped_after);  // ranks that stop together saved that step
  // Rank 0 resumes with rank 1's replacement, in the same step's group (every 2 s: kubectl).
  std::string rank0;
  EXPECT_TRUE(cifar::testing::wait_for(
      [&] {
        rank0 = logs("ardrain-worker-0");
        return rank0.find("resumed at step ") != std::string::npos;
      },
      seconds(60), seconds(2)))
      << rank0;
  EXPECT_NE(rank0.find("the ranks stopped after step " + std::to_string(cost.stopped_after) +
                       " with it saved"),
            std::string::npos)
      << rank0;
  EXPECT_NE(rank0.find("resumed at step " + std::to_string(cost.stopped_after)), std::string::npos)
      << rank0;
  EXPECT_EQ(restart_count("ardrain-worker-0"), 0) << diagnose("ardrain");  // it waited
  EXPECT_EQ(status_of("ardrain").value("restarts", -1), 0);  // an eviction is not a failure
}

}  // namespace
}  // namespace cifar::e2e
