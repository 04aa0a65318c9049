// A node that dies mid-job, for real (node.sh kill: its kubelet, containerd, kube-proxy, shims
// and every process of its pods SIGKILLed), has its pods replaced on the live node once the
// control plane has marked it NotReady and runPolicy.nodeFailureGraceSeconds has passed: the job
// resumes from its checkpoint and ends Succeeded, for a parameter-server job and for an
// all-reduce job. The node is brought back once they are replaced, and nothing of the job is left
// on it.
// These cases take the whole cluster (ctest resource `cluster`, both slots): a dead node would
// take other tests' pods with it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/second_node.h"

namespace cifar::e2e {
namespace {

const std::string kAllReduceTimeout20 =
    "  strategy: {type: AllReduce, allReduce: {backend: gloo, timeoutSeconds: 20}}\n";
class AcrossNodes : public SecondNode {
 protected:
  // What is checked once the dead node is back: that it is Ready, and (kClean) that its kubelet
  // removed what was left of the job there (a minute's wait for the kubelet's housekeeping, the
  // same for any job: one test checks it).
  enum class Afterwards { kReady, kClean };

  // Kills the second node while `job` trains with pods on it and checkpoints exist; then waits
  // for the job to run again with none of its pods there, and for it to succeed. Brings the node
  // back and checks it as `afterwards` says. Returns the pods that were replaced.
  std::set<std::string> kill_the_second_node_under(const std::string& job, Afterwards afterwards) {
    const auto lost_node = second_node();
    std::map<std::string, std::string> before;
    EXPECT_TRUE(wait_for(
        [&] {
          before = placement(job);
          return before.size() == pods_of(job).size() && nodes_of(before).size() == 2;
        },
        seconds(120)))
        << diagnose(job);
    EXPECT_TRUE(wait_until_training(job)) << diagnose(job);
    EXPECT_TRUE(wait_for_checkpoint(run_dir(job))) << run_dir(job);
    std::set<std::string> lost;
    std::map<std::string, std::string> lost_uids;
    for (const auto& [pod_name, node_name] : before) {
      if (node_name == lost_node) {
        lost.insert(pod_name);
        lost_uids[pod_name] = pod(pod_name)["metadata"]["uid"];
      }
    }
    EXPECT_FALSE(lost.empty());
    std::cerr << "on " << lost_node << ":";
    for (const auto& pod_name : lost) std::cerr << " " << pod_name;
    std::cerr << "\n";

    const auto died = Steady::now();
    const auto killed = node("kill");
    restore_ = "start";
    EXPECT_EQ(killed.exit_code, 0) << killed.output;
    EXPECT_TRUE(wait_for([&] { return node_ready(lost_node) == "Unknown"; }, seconds(90)))
        << node_ready(lost_node);
    std::cerr << "node " << lost_node << " NotReady " << seconds_since(died)
              << " s after its death\n";
    // Reported while the grace runs, then replaced: every lost pod anew on the live node.
    EXPECT_TRUE(wait_for(
        [&] {
          return kubectl({"get", "events", "-n", ns_, "--field-selector",
                          "involvedObject.name=" + job + ",reason=NodeLost", "--no-headers"})
                     .output.find("deleting it for good") != std::string::npos;
        },
        seconds(90)))
        << diagnose(job);
    EXPECT_TRUE(wait_for(
        [&] {
          const auto now = placement(job);
          if (now.size() != before.size()) return false;
          for (const auto& [pod_name, node_name] : now) {
            if (node_name == lost_node || phase(pod_name) != "Running") return false;
          }
          for (const auto& [pod_name, uid] : lost_uids) {
            if (pod(pod_name)["metadata"]["uid"] == uid) return false;
          }
          return true;
        },
        seconds(180)))
        << diagnose(job);
    std::cerr << "job " << job << ": its pods running again on the live node "
              << seconds_since(died) << " s after the node's death\n";
    // The node comes back while the job trains on: its kubelet finds the job's pods deleted for
    // good and removes what is left of them (its container garbage collection runs once a minute,
    // which the rest of the run covers); the job's pods stay where they run now.
    const auto restarted = Steady::now();
    const auto back = node("start");
    EXPECT_EQ(back.exit_code, 0) << back.output;
    if (back.exit_code == 0) restore_.clear();
    EXPECT_TRUE(wait_for([&] { return node_ready(lost_node) == "True"; }, seconds(120)));
    std::cerr << "node " << lost_node << ": Ready again " << seconds_since(restarted)
              << " s after its start\n";
    // Training again: the chief's step (status.progress) moves on from where it stood.
    const auto step = [&] {
      return status_of(job).value("progress", json::object()).value("step", int64_t{-1});
    };
    const auto stood = step();
    EXPECT_TRUE(
        wait_for([&] { return step() != stood || state(job) == "Succeeded"; }, seconds(240)))
        << diagnose(job);
    std::cerr << "job " << job << ": training again " << seconds_since(died)
              << " s after the node's death\n";
    EXPECT_TRUE(wait_for_state(job, "Succeeded", seconds(600))) << diagnose(job);
    std::cerr << "job " << job << ": Succeeded " << seconds_since(died)
              << " s after the node's death\n";

    for (const auto& [pod_name, node_name] : placement(job)) EXPECT_NE(node_name, lost_node);
    if (afterwards == Afterwards::kReady) return lost;
    const auto socket = (node_dir(lost_node) / "containerd.sock").string();
    std::string left;
    EXPECT_TRUE(wait_for(
        [&] {
          left = run_process({"ctr", "--address", socket, "-n", "k8s.io", "containers", "ls", "-q",
                              "labels.\"io.kubernetes.pod.namespace\"==" + ns_})
                     .output;
          return left.empty();
        },
        seconds(180)))
        << "containers of " << ns_ << " still on " << lost_node << ":\n"
        << left;
    std::cerr << "node " << lost_node << ": none of the job's containers left "
              << seconds_since(restarted) << " s after its start\n";
    for (const auto& [pod_name, uid] : lost_uids) {
      EXPECT_FALSE(std::filesystem::exists(node_dir(lost_node) / "kubelet/root/pods" / uid))
          << pod_name;
    }
    return lost;
  }
};

// Enough epochs of async PS on the CIFAR-10 slice for the last epoch's loss to end clearly below
// chance's (~2.0-2.1 after six to eight epochs here), with the death early in the first.
constexpr int kEpochsToLearnAcrossTheDeath = 8;

TEST_F(AcrossNodes, AParameterServerJobSurvivesTheDeathOfANode) {
  data_and_checkpoint_volumes();
  // The PS on the node that dies, so that the harder half is always tested: a PS restored from
  // the run's checkpoint under trainers that went on. Preferred, not required: its replacement
  // must go to the live node.
  const std::string ps_on_the_second_node =
      "    PS:\n      replicas: 1\n      template:\n        spec:\n          affinity:\n"
      "            nodeAffinity:\n              preferredDuringSchedulingIgnoredDuringExecution:\n"
      "              - weight: 100\n                preference:\n                  "
      "matchExpressions:\n"
      "                  - {key: kubernetes.io/hostname, operator: In, values: [" +
      second_node() + "]}\n";
  submit("psdeath", kPsAsync,
         ps_on_the_second_node +
             "    Master: {replicas: 1}\n    Worker: {replicas: 2}\n    Evaluator: {replicas: 1}\n",
         // cleanPodPolicy None: the replaced pods' logs are read after the job ended (the default,
         // Running, deletes the PS and any trainer still running at the chief's success).
         "  runPolicy:\n    restartPolicy: OnFailure\n    backoffLimit: 10\n"
         "    nodeFailureGraceSeconds: 5\n    cleanPodPolicy: None\n"
         "    schedulingPolicy: {spreadAcrossNodes: Required}\n",
         "cifar10", kEpochsToLearnAcrossTheDeath, kAsyncPsLearningRate);
  const auto dir = run_dir("psdeath");
  const auto replaced = kill_the_second_node_under("psdeath", Afterwards::kReady);
  // It learned across the death: the last epoch's loss below chance's (ln 10 = 2.30), so the
  // restored PS went on with trained weights, neither reset nor diverged.
  std::ifstream monitor(dir / "monitor.jsonl");
  double last_loss = 0;
  for (std::string line; std::getline(monitor, line);) {
    last_loss = json::parse(line)["train_loss"].get<double>();
  }
  EXPECT_LT(last_loss, 2.2) << (dir / "monitor.jsonl");
  // What was replaced went on from where the job was, not from the start: a trainer from the
  // parameter servers' version, a PS from the run's checkpoint.
  for (const auto& pod_name : replaced) {
    if (pod_name.find("-evaluator-") != std::string::npos) continue;
    const auto logs = kubectl({"logs", pod_name, "-n", ns_});
    ASSERT_EQ(logs.exit_code, 0) << pod_name << ": " << logs.output;
    const auto& log = logs.output;
    if (pod_name.find("-ps-") != std::string::npos) {
      EXPECT_NE(log.find("restoring its"), std::string::npos) << pod_name << ":\n" << log;
      continue;
    }
    const auto start = log.find("starting at version ");
    ASSERT_NE(start, std::string::npos) << pod_name << ":\n" << log;
    EXPECT_GT(std::stol(log.substr(start + std::string("starting at version ").size())), 0)
        << pod_name << ":\n"
        << log;
  }
}

TEST_F(AcrossNodes, AnAllReduceJobSurvivesTheDeathOfANode) {
  data_and_checkpoint_volumes();
  // A rank notices its silent peer at the collective timeout: 20 s rather than the default 60.
  // The node dies after the first checkpoint, in the first epoch, and nothing trains until its
  // rank is replaced; what follows only has to show every epoch once.
  constexpr int kEpochs = kLongEnoughToInterrupt;
  submit("ardeath", kAllReduceTimeout20, "    Worker: {replicas: 2}\n",
         "  runPolicy:\n    restartPolicy: OnFailure\n    backoffLimit: 10\n"
         "    nodeFailureGraceSeconds: 5\n"
         "    schedulingPolicy: {spreadAcrossNodes: Required}\n",
         "cifar10", kEpochs);
  const auto dir = run_dir("ardeath");
  const auto replaced = kill_the_second_node_under("ardeath", Afterwards::kClean);
  EXPECT_EQ(replaced.size(), 1U);
  // Both ranks went on from the checkpoint: every epoch in monitor.jsonl once, in order.
  EXPECT_EQ(recorded_epochs(dir), every_epoch_once(kEpochs));
}

}  // namespace
}  // namespace cifar::e2e
