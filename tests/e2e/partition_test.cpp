// A node cut off, not dead (node.sh partition: its link down, its kubelet and pods left running):
// the control plane marks it NotReady and the operator replaces its pods on the live node after
// runPolicy.nodeFailureGraceSeconds, while the old ones still run beside them, unseen, on a file
// system both nodes share. The replacements carry a newer incarnation (status.incarnation) and
// take the run over; the old chief, at its next write, stops ("this pod was replaced by
// incarnation N") instead of writing beside its replacement (train/fence.h). Shown for a
// parameter-server job whose PS and master are cut off, and for an all-reduce job whose rank 0 is:
// checkpoint steps in the order they appeared never go back, and the job ends Succeeded.
// These cases take the whole cluster (EXCLUSIVE): other cases' pods on the node would be cut off.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/second_node.h"

namespace cifar::e2e {
namespace {

namespace fs = std::filesystem;

// The steps of a run's checkpoints in the order they appeared (polled often enough that none is
// missed between its rename and its rotation), from construction until it is destroyed.
class CheckpointOrder {
 public:
  explicit CheckpointOrder(fs::path dir) : dir_(std::move(dir)), thread_([this] { poll(); }) {}
  ~CheckpointOrder() {
    stop_ = true;
    thread_.join();
  }
  CheckpointOrder(const CheckpointOrder&) = delete;
  CheckpointOrder& operator=(const CheckpointOrder&) = delete;

  std::vector<int64_t> steps() {
    const std::lock_guard lock(mu_);
    return steps_;
  }

 private:
  // A directory lists its files in no particular order: the checkpoints one look finds new (all
  // those there before the first, or several written within one 50 ms period) go in step order.
  void poll() {
    while (!stop_) {
      std::error_code error;
      std::vector<int64_t> found;
      for (const auto& file : fs::directory_iterator(dir_, error)) {
        const auto name = file.path().filename().string();
        const auto at = name.rfind("-step-");
        if (file.path().extension() != ".pt" || at == std::string::npos || name[0] == '.') continue;
        if (seen_.insert(name).second) found.push_back(std::stoll(name.substr(at + 6)));
      }
      std::sort(found.begin(), found.end());
      {
        const std::lock_guard lock(mu_);
        steps_.insert(steps_.end(), found.begin(), found.end());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  fs::path dir_;
  std::mutex mu_;
  std::set<std::string> seen_;
  std::vector<int64_t> steps_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Placed on the second node by preference (its replacement goes to the live one), or away from it.
std::string on_node(const std::string& replica, const std::string& node, bool there) {
  return "    " + replica +
         ":\n      replicas: 1\n      template:\n        spec:\n          affinity:\n"
         "            nodeAffinity:\n              "
         "preferredDuringSchedulingIgnoredDuringExecution:\n"
         "              - weight: 100\n                preference:\n                  "
         "matchExpressions:\n"
         "                  - {key: kubernetes.io/hostname, operator: " +
         (there ? "In" : "NotIn") + ", values: [" + node + "]}\n";
}

class Partitions : public SecondNode {
 protected:
  // Everything a pod of the second node wrote to its container logs, read where its kubelet keeps
  // them (the API server cannot reach a cut-off node).
  std::string logs_on_second_node(const std::string& pod_name, const std::string& uid) {
    const auto dir = node_dir(second_node()) / "pod-logs" / (ns_ + "_" + pod_name + "_" + uid);
    std::string all;
    std::error_code error;
    for (const auto& file : fs::recursive_directory_iterator(dir, error)) {
      if (!file.is_regular_file()) continue;
      std::ifstream in(file.path());
      all.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return all;
  }

  // A job whose chief is on the second node when it is cut off.
  struct CutJob {
    std::string name;
    std::string chief;
  };

  // Cuts the second node off while each job trains with its chief (and whatever else prefers the
  // node) there and checkpoints exist; waits for the replacements to run on the live node, for
  // each old chief to say it stopped because it was replaced, and half a minute more; heals the
  // node, and waits for the jobs to succeed. Returns each job's checkpoint steps in the order they
  // appeared. (One partition for all the jobs: a partition's waits are the case's cost.)
  std::map<std::string, std::vector<int64_t>> cut_off_the_second_node_under(
      const std::vector<CutJob>& jobs) {
    const auto cut_node = second_node();
    std::map<std::string, std::unique_ptr<CheckpointOrder>> orders;
    std::map<std::string, std::string> old_uids;  // the old chiefs'
    std::map<std::string, std::string> cut_uids;  // every pod on the node
    for (const auto& [job, chief] : jobs) {
      std::map<std::string, std::string> before;
      EXPECT_TRUE(wait_for(
          [&, &job = job, &chief = chief] {
            before = placement(job);
            return before.size() == pods_of(job).size() && before.count(chief) != 0;
          },
          seconds(120)))
          << diagnose(job);
      EXPECT_EQ(before[chief], cut_node) << chief << " should prefer the node that is cut off";
      EXPECT_TRUE(wait_until_training(job)) << diagnose(job);
      const auto dir = run_dir(job);
      EXPECT_TRUE(wait_for_checkpoint(dir)) << dir;
      orders[job] = std::make_unique<CheckpointOrder>(dir);
      old_uids[chief] = pod(chief)["metadata"]["uid"];
      for (const auto& [pod_name, node_name] : before) {
        if (node_name == cut_node) cut_uids[pod_name] = pod(pod_name)["metadata"]["uid"];
      }
    }

    const auto cut = Steady::now();
    const auto partitioned = node("partition");
    EXPECT_EQ(partitioned.exit_code, 0) << partitioned.output;
    restore_ = "heal";
    EXPECT_TRUE(wait_for([&] { return node_ready(cut_node) == "Unknown"; }, seconds(90)))
        << node_ready(cut_node);
    std::cerr << "node " << cut_node << " NotReady " << seconds_since(cut) << " s after the cut\n";
    EXPECT_TRUE(wait_for(
        [&] {
          for (const auto& [pod_name, uid] : cut_uids) {
            json now;
            try {
              now = pod(pod_name);
            } catch (const cifar::kube::ApiError&) {  // deleted, its replacement not made yet
              return false;
            }
            if (now["metadata"].value("uid", "") == uid ||
                now.value("status", json::object()).value("phase", "") != "Running") {
              return false;
            }
          }
          return true;
        },
        seconds(180)))
        << diagnose(jobs.front().name);
    const auto replaced = Steady::now();
    for (const auto& [job, chief] : jobs) {
      std::cerr << "job " << job << ": replacements running " << seconds_since(cut)
                << " s after the cut, incarnation " << status_of(job).value("incarnation", 0)
                << "\n";
    }
    // The old chiefs run on, cut off: at their next write they find the run taken over.
    for (const auto& [job, chief] : jobs) {
      std::string old_log;
      EXPECT_TRUE(wait_for(
          [&, &chief = chief] {
            old_log = logs_on_second_node(chief, old_uids[chief]);
            return old_log.find("this pod was replaced by incarnation") != std::string::npos;
          },
          seconds(150)))
          << "the old " << chief << " on " << cut_node << ":\n"
          << old_log;
      std::cerr << "the old " << chief << " stopped, replaced, " << seconds_since(cut)
                << " s after the cut\n";
    }
    // The partition holds half a minute past the replacements: long enough for the kubelet to
    // restart an old chief that stopped (its first back-off is 10 s), which is fenced out too.
    std::this_thread::sleep_until(replaced + seconds(30));

    const auto healed = node("heal");
    EXPECT_EQ(healed.exit_code, 0) << healed.output;
    if (healed.exit_code == 0) restore_.clear();
    EXPECT_TRUE(wait_for([&] { return node_ready(cut_node) == "True"; }, seconds(120)));
    std::map<std::string, std::vector<int64_t>> steps;
    for (const auto& [job, chief] : jobs) {
      EXPECT_TRUE(wait_for_state(job, "Succeeded", seconds(600))) << diagnose(job);
      std::cerr << "job " << job << ": Succeeded " << seconds_since(cut) << " s after the cut\n";
      steps[job] = orders[job]->steps();
    }
    return steps;
  }

  static void expect_never_back(const std::vector<int64_t>& steps) {
    ASSERT_FALSE(steps.empty());
    for (size_t i = 1; i < steps.size(); ++i) {
      EXPECT_GT(steps[i], steps[i - 1]) << "checkpoint " << i << " of " << steps.size()
                                        << " went back: " << ::testing::PrintToString(steps);
    }
  }
};

// Both jobs under one partition: a PS job whose PS and master are cut off (they could train on
// together), and an all-reduce job whose rank 0 is (its collective breaks, and while it waits for
// the group to form again it finds its replacement's fence and stops).
TEST_F(Partitions, JobsWhosePodsAreCutOffWriteNothingIntoTheRunOnceReplaced) {
  data_and_checkpoint_volumes();
  const auto cut_node = second_node();
  const std::string run_policy =
      "  runPolicy:\n    restartPolicy: OnFailure\n    backoffLimit: 10\n"
      "    nodeFailureGraceSeconds: 5\n    schedulingPolicy: {spreadAcrossNodes: None}\n";
  // The all-reduce job cannot train while its rank 0 is cut off (its collectives need both):
  // whatever it trained before the cut, it is mid-run when replaced.
  constexpr int kEpochs = kLongEnoughToInterrupt;
  // The PS job's master and PS train on together on the cut-off side, faster than before (~5 s
  // an epoch): with 8 epochs they once finished the job before the replacements ran (27 s after
  // the cut), and nothing was left to stop. Twice as long, they are mid-run when replaced.
  constexpr int kPsEpochs = 4 * kLongEnoughToInterrupt;
  submit("pscut", kPsAsync,
         on_node("PS", cut_node, true) + on_node("Master", cut_node, true) +
             on_node("Worker", cut_node, false),
         run_policy, "cifar10", kPsEpochs, kAsyncPsLearningRate);
  // Rank 1 notices its cut-off peer at the collective timeout: 20 s rather than the default 60.
  submit("arcut", "  strategy: {type: AllReduce, allReduce: {backend: gloo, timeoutSeconds: 20}}\n",
         on_node("Master", cut_node, true) + on_node("Worker", cut_node, false), run_policy,
         "cifar10", kEpochs);
  const auto steps =
      cut_off_the_second_node_under({{"pscut", "pscut-master-0"}, {"arcut", "arcut-master-0"}});
  for (const auto* job : {"pscut", "arcut"}) {
    SCOPED_TRACE(job);
    ASSERT_EQ(steps.count(job), 1U);
    expect_never_back(steps.at(job));
  }
  // No epoch recorded twice (an old chief writing beside its replacement would): the all-reduce
  // job records every epoch once. The async PS job's epochs only go forward, to the last: its
  // version counts every trainer's pushes, so when the worker pushes to the restored PS before the
  // new master's first step, the master's first record can be an epoch past the last one recorded
  // (a run on 2026-11-27 recorded 1, 2, 4, ..., 8), as any async PS trainer that joins late does.
  EXPECT_EQ(recorded_epochs(run_dir("arcut")), every_epoch_once(kEpochs));
  const auto ps_epochs = recorded_epochs(run_dir("pscut"));
  ASSERT_FALSE(ps_epochs.empty());
  for (size_t i = 1; i < ps_epochs.size(); ++i) {
    EXPECT_GT(ps_epochs[i], ps_epochs[i - 1]) << ::testing::PrintToString(ps_epochs);
  }
  EXPECT_EQ(ps_epochs.back(), kPsEpochs) << ::testing::PrintToString(ps_epochs);
}

}  // namespace
}  // namespace cifar::e2e
