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
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "contract/metrics.h"
#include "contract/ports.h"
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

  // The steps a trainer pod has taken (its cifar_steps_total, read through the API server's proxy
  // to its metrics port: to the second, where status.progress is read every few seconds); 0 if it
  // serves none (yet).
  double steps_taken(const std::string& pod_name) {
    const auto metrics =
        kubectl({"get", "--raw",
                 "/api/v1/namespaces/" + ns_ + "/pods/" + pod_name + ":" +
                     std::to_string(contract::kMetricsPort.number) + "/proxy/metrics",
                 "--request-timeout=2s"});
    if (metrics.exit_code != 0) return 0;
    std::istringstream lines(metrics.output);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(std::string(contract::metric::kSteps) + "{", 0) == 0) {
        return std::stod(line.substr(line.rfind(' ') + 1));
      }
    }
    return 0;
  }

  // Whether `now` (pod -> node) has all `pods` of the job again, none on `lost_node`, each lost
  // pod a new one (another UID), every one Running.
  bool replaced_and_running(const std::map<std::string, std::string>& now, size_t pods,
                            const std::string& lost_node, const std::set<std::string>& lost,
                            const std::map<std::string, std::string>& lost_uids) {
    if (now.size() != pods) return false;
    for (const auto& [pod_name, node_name] : now) {
      if (node_name == lost_node || phase(pod_name) != "Running") return false;
    }
    try {
      for (const auto& pod_name : lost) {
        if (pod(pod_name)["metadata"]["uid"] == lost_uids.at(pod_name)) return false;
      }
    } catch (const cifar::kube::ApiError&) {  // deleted since `now` was read
      return false;
    }
    return true;
  }

  // Kills the second node while every one of `jobs` trains with pods on it and checkpoints exist;
  // waits for each job to run again with none of its pods there and to train again (the times
  // since the death are printed: README's recovery figures), brings the node back, waits for
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
    // Nothing trains now (each job has a pod on the dead node that the rest wait for): the steps
    // the live pods have taken so far. A step beyond them is training again.
    std::map<std::string, std::map<std::string, double>> steps_at_loss;
    for (const auto& job : jobs) {
      for (const auto& [pod_name, node_name] : before[job]) {
        if (node_name != lost_node) steps_at_loss[job][pod_name] = steps_taken(pod_name);
      }
    }
    // The jobs watched side by side until each has its lost pods anew on the live node, running,
    // and trains again. Until then REASON says the node was lost (status.nodeLoss), not what the
    // pods went through.
    std::map<std::string, double> running_again;
    std::map<std::string, double> training_again;
    std::map<std::string, std::set<std::string>> reasons;
    EXPECT_TRUE(wait_for(
        [&] {
          for (const auto& job : jobs) {
            // Both looked for until both are seen: an elastic job's workers left train on before
            // the replacement runs.
            if (training_again.count(job) != 0 && running_again.count(job) != 0) continue;
            const auto status = status_of(job);
            if (status.value("state", "") == "Succeeded") {
              training_again.emplace(job, seconds_since(died));
              running_again.emplace(job, seconds_since(died));
              continue;
            }
            reasons[job].insert(status.value("reason", ""));
            const auto now = placement(job);
            if (running_again.count(job) == 0 &&
                replaced_and_running(now, before[job].size(), lost_node, lost[job], lost_uids)) {
              running_again[job] = seconds_since(died);
            }
            for (const auto& [pod_name, node_name] : now) {
              if (training_again.count(job) != 0) break;
              if (node_name == lost_node || phase(pod_name) != "Running") continue;
              const auto at_loss = steps_at_loss[job].find(pod_name);  // a replacement: none
              if (steps_taken(pod_name) >
                  (at_loss == steps_at_loss[job].end() ? 0.0 : at_loss->second)) {
                training_again[job] = seconds_since(died);
                break;
              }
            }
          }
          return training_again.size() == jobs.size() && running_again.size() == jobs.size();
        },
        seconds(240)))
        << diagnose(jobs.front());
    for (const auto& job : jobs) {
      // Reported while the grace ran, then replaced.
      EXPECT_NE(kubectl({"get", "events", "-n", ns_, "--field-selector",
                         "involvedObject.name=" + job + ",reason=NodeLost", "--no-headers"})
                    .output.find("deleting it for good"),
                std::string::npos)
          << diagnose(job);
      std::cerr << "job " << job << ": its pods running again on the live node "
                << running_again[job] << " s after the node's death, training again "
                << training_again[job] << " s after it; REASON meanwhile:";
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
    // The node comes back while the jobs train on: its kubelet finds their pods deleted for good;
    // the jobs' pods stay where they run now.
    const auto restarted = Steady::now();
    const auto back = node("start");
    EXPECT_EQ(back.exit_code, 0) << back.output;
    if (back.exit_code == 0) restore_.clear();
    EXPECT_TRUE(wait_for([&] { return node_ready(lost_node) == "True"; }, seconds(120)));
    std::cerr << "node " << lost_node << ": Ready again " << seconds_since(restarted)
              << " s after its start\n";
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
// An elastic job of 3 workers (a global batch of 3 x 25 that divides the slice's 1500 samples: 20
// steps an epoch, each sample trained once): still training when the node dies and after.
constexpr int kElasticEpochs = 7;

// One death under three jobs: a parameter-server job whose PS is on the node that dies (the harder
// half: a PS restored from the run's checkpoint under trainers that went on), an all-reduce job
// whose rank there is lost (nothing trains until it is replaced), and an elastic all-reduce job.
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
  constexpr int kAllReduceEpochs = kLongEnoughToHalt;
  submit("ardeath", every_default() ? kAllReduce : kAllReduceTimeout20,
         "    Worker: {replicas: 2}\n", run_policy, "cifar10", kAllReduceEpochs);

  // An elastic all-reduce job (3 workers, at least 2; every default but the spread): the workers
  // left go on without waiting out a timeout or the grace, and those lost are replaced at once.
  // cleanPodPolicy None: the workers left are read after the job ended (a worker still running at
  // the chief's success would be deleted under the default).
  batch_size_ = 25;
  submit("eldeath", kAllReduce, "    Worker: {replicas: 3, minReplicas: 2, maxReplicas: 3}\n",
         run_policy + "    cleanPodPolicy: None\n", "cifar10", kElasticEpochs);

  const auto replaced = kill_the_second_node_under({"psdeath", "ardeath", "eldeath"});

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

  // The elastic job's workers left held the group's state: whichever formed a round after the
  // death resumed from memory, and every epoch is recorded once, training each sample once
  // across the worlds of 3, 2 and 3 and the step redone.
  ASSERT_EQ(replaced.count("eldeath"), 1U);
  expect_every_epoch_to_train_each_sample_once("eldeath", kElasticEpochs);
  bool resumed_from_memory = false;
  for (int i = 0; i < 3; ++i) {
    const auto name = "eldeath-worker-" + std::to_string(i);
    if (replaced.at("eldeath").count(name) != 0) continue;
    const auto logs = kubectl({"logs", name, "-n", ns_}).output;
    resumed_from_memory =
        resumed_from_memory || logs.find("memory (no checkpoint read)") != std::string::npos;
  }
  EXPECT_TRUE(resumed_from_memory) << diagnose("eldeath");
  // Left with fewer workers than its minimum (when two of the three were on the node), the job
  // said so while nobody trained.
  const auto& lost = replaced.at("eldeath");
  const auto lost_workers = std::count_if(lost.begin(), lost.end(), [](const std::string& name) {
    return name.find("-worker-") != std::string::npos;
  });
  std::cerr << "eldeath lost " << lost_workers << " of its 3 workers (at least 2)\n";
  if (lost_workers >= 2) {
    EXPECT_NE(events("BelowMinimum").find("1 worker is running, fewer than minReplicas 2"),
              std::string::npos)
        << events("BelowMinimum");
  }
}

// A GPU job on the cluster's one GPU node (start.sh --gpus: node 2), which dies: its pods are
// replaced, but the replacements have nowhere to go (node 1 has no GPUs), so they wait, Pending,
// and the job says why (Unschedulable, in the scheduler's words); when the node is back they land
// there, and the job resumes from its checkpoint and ends Succeeded.
TEST_F(AcrossNodes, AGpuJobWaitsForItsOnlyGpuNodeAndResumesThereWhenItIsBack) {
  const auto gpu_node = second_node();
  ASSERT_EQ(kubectl({"get", "node", gpu_node, "-o",
                     R"(jsonpath={.metadata.labels.nvidia\.com/gpu\.present})"})
                .output,
            "true");
  data_and_checkpoint_volumes();
  device_ = "cpu";  // GPUs held, not there
  submit("gpudeath", kAllReduceTimeout20, gpu_workers(2, 1),
         "  runPolicy:\n    restartPolicy: OnFailure\n    backoffLimit: 10\n"
         "    nodeFailureGraceSeconds: 5\n    cleanPodPolicy: None\n",
         "cifar10", kLongEnoughToHalt);
  std::map<std::string, std::string> before;
  ASSERT_TRUE(wait_for(
      [&] {
        before = placement("gpudeath");
        return before.size() == 2 && nodes_of(before) == std::set<std::string>{gpu_node};
      },
      seconds(120)))
      << diagnose("gpudeath");
  ASSERT_TRUE(wait_until_training("gpudeath")) << diagnose("gpudeath");
  ASSERT_TRUE(wait_for_checkpoint(run_dir("gpudeath"))) << run_dir("gpudeath");
  std::map<std::string, std::string> uids;
  for (const auto& [pod_name, node_name] : before)
    uids[pod_name] = pod(pod_name)["metadata"]["uid"];

  const auto died = Steady::now();
  const auto killed = node("kill");
  restore_ = "start";
  ASSERT_EQ(killed.exit_code, 0) << killed.output;
  ASSERT_TRUE(wait_for([&] { return node_ready(gpu_node) == "Unknown"; }, seconds(90)));
  // The replacements wait for a GPU node, and the job says why.
  std::string reason;
  std::string message;
  ASSERT_TRUE(wait_for(
      [&] {
        const auto status = status_of("gpudeath");
        reason = status.value("reason", "");
        message = status.value("message", "");
        // The scheduler's words: node 1 is no GPU node (the RuntimeClass's nodeSelector), the
        // GPU node is unreachable (its taint).
        return reason == "Unschedulable" &&
               message.find("didn't match Pod's node affinity/selector") != std::string::npos;
      },
      seconds(120)))
      << reason << ": " << message << "\n"
      << diagnose("gpudeath");
  std::cerr << "job gpudeath, " << seconds_since(died)
            << " s after its GPU node's death: " << reason << ": " << message << "\n";
  // For a while, to be sure: no pod of the job is placed on the node without GPUs.
  for (int look = 0; look < 5; ++look) {
    for (const auto& [pod_name, node_name] : placement("gpudeath")) {
      EXPECT_EQ(node_name, gpu_node) << pod_name;
    }
    EXPECT_NE(state("gpudeath"), "Failed") << diagnose("gpudeath");
    std::this_thread::sleep_for(seconds(2));
  }

  const auto back = node("start");
  ASSERT_EQ(back.exit_code, 0) << back.output;
  restore_.clear();
  ASSERT_TRUE(wait_for_state("gpudeath", "Succeeded", seconds(600))) << diagnose("gpudeath");
  std::cerr << "job gpudeath: Succeeded " << seconds_since(died)
            << " s after its GPU node's death\n";
  const auto after = placement("gpudeath");
  EXPECT_EQ(nodes_of(after), std::set<std::string>{gpu_node});
  for (const auto& [pod_name, uid] : uids) {
    EXPECT_NE(pod(pod_name)["metadata"]["uid"], uid) << pod_name << " was not replaced";
  }
  // The replacements went on from the run's checkpoint.
  const auto rank0 = kubectl({"logs", "gpudeath-worker-0", "-n", ns_}).output;
  const auto resumed = number_after(rank0, "resumed at step ", "");
  EXPECT_GT(resumed, 0) << rank0;
}

}  // namespace
}  // namespace cifar::e2e
