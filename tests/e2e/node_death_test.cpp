// A node that dies mid-job, for real (node.sh kill: its kubelet, containerd, kube-proxy, shims
// and every process of its pods SIGKILLed), has its pods replaced on the live node once the
// control plane has marked it NotReady and runPolicy.nodeFailureGraceSeconds has passed: the jobs
// resume from their checkpoints and end Succeeded, a parameter-server job and an all-reduce job
// under one death (a death's waits are the case's cost). The node is brought back once they are
// replaced, and nothing of the jobs is left on it.
// This case takes the whole cluster (ctest resource `cluster`, both slots): a dead node would
// take other tests' pods with it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/second_node.h"

namespace cifar::e2e {
namespace {

const std::string kAllReduceTimeout20 =
    "  strategy: {type: AllReduce, allReduce: {backend: gloo, timeoutSeconds: 20}}\n";
// CIFAR_E2E_EVERY_DEFAULT=1 runs the jobs as a user writes them, without the short
// nodeFailureGraceSeconds and collective timeout below: how long recovery takes with every
// default (README "Several nodes, and a node that dies"); make test runs the short ones.
bool every_default() { return std::getenv("CIFAR_E2E_EVERY_DEFAULT") != nullptr; }
class AcrossNodes : public SecondNode {
 protected:
  // Waits until `job` trains with its pods on both nodes and has a checkpoint; returns where its
  // pods are.
  std::map<std::string, std::string> spread_and_training(const std::string& job) {
    std::map<std::string, std::string> placed;
    EXPECT_TRUE(wait_for(
        [&] {
          placed = placement(job);
          return placed.size() == pods_of(job).size() && nodes_of(placed).size() == 2;
        },
        seconds(120)))
        << diagnose(job);
    EXPECT_TRUE(wait_until_training(job)) << diagnose(job);
    EXPECT_TRUE(wait_for_checkpoint(run_dir(job))) << run_dir(job);
    return placed;
  }

  // Kills the second node while every one of `jobs` trains with pods on it and checkpoints exist;
  // waits for each job to run again with none of its pods there, brings the node back, waits for
  // the jobs to succeed and for the node's kubelet to remove what was left of them there (its
  // container garbage collection runs once a minute, which the rest of the run covers). Returns
  // each job's pods that were replaced.
  std::map<std::string, std::set<std::string>> kill_the_second_node_under(
      const std::vector<std::string>& jobs) {
    const auto lost_node = second_node();
    std::map<std::string, std::map<std::string, std::string>> before;  // job -> pod -> node
    std::map<std::string, std::set<std::string>> lost;
    std::map<std::string, std::string> lost_uids;
    for (const auto& job : jobs) {
      before[job] = spread_and_training(job);
      for (const auto& [pod_name, node_name] : before[job]) {
        if (node_name != lost_node) continue;
        lost[job].insert(pod_name);
        lost_uids[pod_name] = pod(pod_name)["metadata"]["uid"];
      }
      EXPECT_FALSE(lost[job].empty()) << job;
    }
    std::cerr << "on " << lost_node << ":";
    for (const auto& [pod_name, uid] : lost_uids) std::cerr << " " << pod_name;
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
    for (const auto& job : jobs) {
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
            if (now.size() != before[job].size()) return false;
            for (const auto& [pod_name, node_name] : now) {
              if (node_name == lost_node || phase(pod_name) != "Running") return false;
            }
            for (const auto& pod_name : lost[job]) {
              if (pod(pod_name)["metadata"]["uid"] == lost_uids[pod_name]) return false;
            }
            return true;
          },
          seconds(180)))
          << diagnose(job);
      std::cerr << "job " << job << ": its pods running again on the live node "
                << seconds_since(died) << " s after the node's death\n";
    }
    // The node comes back while the jobs train on: its kubelet finds their pods deleted for good;
    // the jobs' pods stay where they run now.
    const auto restarted = Steady::now();
    const auto back = node("start");
    EXPECT_EQ(back.exit_code, 0) << back.output;
    if (back.exit_code == 0) restore_.clear();
    EXPECT_TRUE(wait_for([&] { return node_ready(lost_node) == "True"; }, seconds(120)));
    std::cerr << "node " << lost_node << ": Ready again " << seconds_since(restarted)
              << " s after its start\n";
    // Training again: each chief's step (status.progress) moves on from where it stood, the jobs
    // watched side by side. Until then REASON says the node was lost (status.nodeLoss), not what
    // the pods went through.
    std::map<std::string, int64_t> stood;
    std::map<std::string, std::set<std::string>> reasons;
    std::map<std::string, double> again;
    EXPECT_TRUE(wait_for(
        [&] {
          for (const auto& job : jobs) {
            if (again.count(job) != 0) continue;
            const auto status = status_of(job);
            const auto step = status.value("progress", json::object()).value("step", int64_t{-1});
            if (stood.count(job) == 0) stood[job] = step;
            if (step != stood[job] || status.value("state", "") == "Succeeded") {
              again[job] = seconds_since(died);
              continue;
            }
            reasons[job].insert(status.value("reason", ""));
          }
          return again.size() == jobs.size();
        },
        seconds(240)))
        << diagnose(jobs.front());
    for (const auto& job : jobs) {
      std::cerr << "job " << job << ": training again " << again[job]
                << " s after the node's death; REASON meanwhile:";
      for (const auto& reason : reasons[job]) std::cerr << " '" << reason << "'";
      std::cerr << "\n";
      reasons[job].erase("");
      reasons[job].erase("NodeLost");
      EXPECT_TRUE(reasons[job].empty()) << job << ": " << ::testing::PrintToString(reasons[job]);
      // The pods left on the live node did not restart: they waited for the replacements.
      for (const auto& [pod_name, node_name] : before[job]) {
        if (lost[job].count(pod_name) != 0) continue;
        json left;
        try {
          left = pod(pod_name);
        } catch (const cifar::kube::ApiError&) {  // the job ended, and cleanPodPolicy took it
          continue;
        }
        EXPECT_EQ(restart_count_of(left), 0) << pod_name << "\n" << diagnose(job);
      }
    }
    for (const auto& job : jobs) {
      EXPECT_TRUE(wait_for_state(job, "Succeeded", seconds(600))) << diagnose(job);
      std::cerr << "job " << job << ": Succeeded " << seconds_since(died)
                << " s after the node's death\n";
      for (const auto& [pod_name, node_name] : placement(job)) EXPECT_NE(node_name, lost_node);
    }

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
    std::cerr << "node " << lost_node << ": none of the jobs' containers left "
              << seconds_since(restarted) << " s after its start\n";
    for (const auto& [pod_name, uid] : lost_uids) {
      EXPECT_FALSE(std::filesystem::exists(node_dir(lost_node) / "kubelet/root/pods" / uid))
          << pod_name;
    }
    return lost;
  }
};

// Enough epochs of async PS on the CIFAR-10 slice for the last epoch's loss to end clearly below
// chance's (~2.0-2.1 after six to eight epochs here), with the death early in the run.
constexpr int kEpochsToLearnAcrossTheDeath = 8;

// One death under two jobs: a parameter-server job whose PS is on the node that dies (the harder
// half: a PS restored from the run's checkpoint under trainers that went on), and an all-reduce
// job whose rank there is lost (nothing trains until it is replaced).
TEST_F(AcrossNodes, JobsSurviveTheDeathOfANodeAndGoOnFromWhereTheyWere) {
  data_and_checkpoint_volumes();
  const std::string run_policy =
      "  runPolicy:\n    restartPolicy: OnFailure\n    backoffLimit: 10\n" +
      std::string(every_default() ? "" : "    nodeFailureGraceSeconds: 5\n") +
      "    schedulingPolicy: {spreadAcrossNodes: Required}\n";
  // The PS on the node that dies: preferred, not required, since its replacement must go to the
  // live node.
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
         run_policy + "    cleanPodPolicy: None\n", "cifar10", kEpochsToLearnAcrossTheDeath,
         kAsyncPsLearningRate);
  // A rank notices its silent peer at the collective timeout: 20 s rather than the default 60.
  // Submitted once the PS job trains, so that it has not ended before the node dies.
  spread_and_training("psdeath");
  constexpr int kAllReduceEpochs = kLongEnoughToInterrupt;
  submit("ardeath", every_default() ? kAllReduce : kAllReduceTimeout20,
         "    Worker: {replicas: 2}\n", run_policy, "cifar10", kAllReduceEpochs);

  const auto replaced = kill_the_second_node_under({"psdeath", "ardeath"});

  // The PS job learned across the death: the last epoch's loss below chance's (ln 10 = 2.30), so
  // the restored PS went on with trained weights, neither reset nor diverged.
  const auto ps_dir = run_dir("psdeath");
  std::ifstream monitor(ps_dir / "monitor.jsonl");
  double last_loss = 0;
  for (std::string line; std::getline(monitor, line);) {
    last_loss = json::parse(line)["train_loss"].get<double>();
  }
  EXPECT_LT(last_loss, 2.2) << (ps_dir / "monitor.jsonl");
  // What was replaced went on from where the job was, not from the start: a trainer from the
  // parameter servers' version, a PS from the run's checkpoint.
  ASSERT_EQ(replaced.count("psdeath"), 1U);
  for (const auto& pod_name : replaced.at("psdeath")) {
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
  // The all-reduce job lost one rank, and both ranks went on from the checkpoint: every epoch in
  // monitor.jsonl once, in order.
  ASSERT_EQ(replaced.count("ardeath"), 1U);
  EXPECT_EQ(replaced.at("ardeath").size(), 1U);
  EXPECT_EQ(recorded_epochs(run_dir("ardeath")), every_epoch_once(kAllReduceEpochs));
}

}  // namespace
}  // namespace cifar::e2e
