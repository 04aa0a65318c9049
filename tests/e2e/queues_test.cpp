// Jobs in a Kueue queue on the local cluster (deploy/local-cluster/kueue.sh: Kueue itself, from
// its release manifests, with its pod integration), with a quota in CPUs or in GPUs. A job that
// names a LocalQueue is one Kueue pod group: all-or-nothing (two jobs for a quota of one: one runs
// whole, the other waits with every pod gated, then runs), its quota given back when it ends (a PS
// job's pods included), and a preemption by a higher-priority job that is not charged as a restart
// and resumes from the checkpoint once readmitted. An elastic job in a queue: its workers above
// the minimum admitted one by one while the others train.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "framework/clock.h"
#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

using cifar::op::parse_time;

class Queues : public Cluster {
 protected:
  void SetUp() override {
    Cluster::SetUp();
    // A flavor, a ClusterQueue for this namespace alone with quota() that preempts lower
    // priorities, its LocalQueue "team", and two PriorityClasses (cluster-scoped: named after
    // the namespace).
    cluster_objects_ = {"resourceflavor/" + ns_, "clusterqueue/" + ns_,
                        "priorityclass/" + ns_ + "-low", "priorityclass/" + ns_ + "-high"};
    apply(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: " + ns_ +
        "}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: " + ns_ +
        "}\nspec:\n"
        "  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: " +
        ns_ +
        "}}\n"
        "  preemption: {withinClusterQueue: LowerPriority}\n"
        "  resourceGroups:\n  - coveredResources: [" +
        quota_resources() + "]\n    flavors:\n    - name: " + ns_ + "\n      resources: [" +
        quota() +
        "]\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: team}\n"
        "spec: {clusterQueue: " +
        ns_ + "}\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: " +
        ns_ + "-low}\nvalue: 100\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n" +
        "metadata: {name: " + ns_ + "-high}\nvalue: 1000\n");
    // The ClusterQueue is active once Kueue has seen its flavor.
    ASSERT_TRUE(wait_for(
        [&] {
          return kubectl({"get", "clusterqueue", ns_, "-o",
                          R"(jsonpath={.status.conditions[?(@.type=="Active")].status})"})
                     .output == "True";
        },
        seconds(60)));
  }

  void TearDown() override {
    Cluster::TearDown();
    for (const auto& object : cluster_objects_) kubectl({"delete", object, "--wait=false"});
  }

  // The ClusterQueue's resources and their quotas: `kCpuQuota` CPUs.
  [[nodiscard]] virtual std::string quota_resources() const { return "cpu"; }
  [[nodiscard]] virtual std::string quota() const {
    return std::string("{name: cpu, nominalQuota: ") + kCpuQuota + "}";
  }

  // The job's pods (every one created) and how many of them a scheduling gate holds, and how
  // many are placed on a node.
  struct Pods {
    size_t total = 0;
    size_t gated = 0;
    size_t placed = 0;
  };
  Pods pods_now(const std::string& job) {
    Pods counts;
    for (const auto& p : pods_of(job)) {
      if (p["metadata"].contains("deletionTimestamp")) continue;
      ++counts.total;
      if (!p["spec"].value("schedulingGates", json::array()).empty()) ++counts.gated;
      if (!p["spec"].value("nodeName", "").empty()) ++counts.placed;
    }
    return counts;
  }

  std::string reason_of(const std::string& job) { return status_of(job).value("reason", ""); }
  std::string message_of(const std::string& job) { return status_of(job).value("message", ""); }

  // How much of `resource` the ClusterQueue has handed out now, as Kueue reports it ("0" when
  // none).
  std::string in_use(const std::string& resource = "cpu") {
    const auto used = kubectl({"get", "clusterqueue", ns_, "-o",
                               R"(jsonpath={.status.flavorsUsage[0].resources[?(@.name==")" +
                                   resource + R"(")].total})"})
                          .output;
    return used.empty() ? "0" : used;
  }
  int admitted_workloads() {
    const auto n =
        kubectl({"get", "clusterqueue", ns_, "-o", "jsonpath={.status.admittedWorkloads}"}).output;
    return n.empty() ? 0 : std::stoi(n);
  }

  // The Kueue pod group (and Workload) of the job's pods.
  std::string group_of(const std::string& job) {
    return pods_of(job).at(0)["metadata"]["labels"].value("kueue.x-k8s.io/pod-group-name", "");
  }
  static constexpr const char* kAdmittedAt =
      R"(jsonpath={.status.conditions[?(@.type=="Admitted")].lastTransitionTime})";
  // How many pods the group's Workload is admitted for: the counts of its pod sets' assignments
  // (one pod set per distinct pod template), 0 while it is not admitted.
  int64_t admitted_pods(const std::string& job) {
    const auto got = kubectl({"get", "workload", group_of(job), "-n", ns_, "-o", "json"}).output;
    const auto workload = json::parse(got, nullptr, /*allow_exceptions=*/false);
    if (!workload.is_object()) return 0;
    const auto status = workload.value("status", json::object());
    bool admitted = false;
    for (const auto& c : status.value("conditions", json::array())) {
      admitted = admitted || (c.value("type", "") == "Admitted" && c.value("status", "") == "True");
    }
    int64_t pods = 0;
    for (const auto& a :
         status.value("admission", json::object()).value("podSetAssignments", json::array())) {
      pods += a.value("count", int64_t{0});
    }
    return admitted ? pods : 0;
  }

  bool has_event(const std::string& job, const std::string& reason) {
    return !kubectl({"get", "events", "-n", ns_, "--field-selector",
                     "involvedObject.name=" + job + ",reason=" + reason, "--no-headers"})
                .output.empty();
  }

  // Until every pod of the job has its scheduling gate off (Kueue admitted the group): how long
  // after `applied` that was.
  double ungated_after(const std::string& job, Steady::time_point applied) {
    EXPECT_TRUE(wait_for(
        [&] {
          const auto now = pods_now(job);
          return now.total > 0 && now.gated == 0;
        },
        seconds(120)))
        << diagnose(job);
    return seconds_since(applied);
  }

  // That the job's group was admitted once every one of `pods` (another job's) had ended.
  void expect_admitted_after_they_ended(const std::string& job,
                                        const std::vector<std::string>& pods) {
    const auto workload = kubectl({"get", "workload", group_of(job), "-n", ns_, "-o", kAdmittedAt});
    ASSERT_EQ(workload.exit_code, 0) << workload.output;
    const auto admitted_at = parse_time(workload.output);
    for (const auto& name : pods) {
      const auto ended = pod(name)["status"]["containerStatuses"][0]["state"]["terminated"].value(
          "finishedAt", "");
      ASSERT_FALSE(ended.empty()) << name << " had not ended when " << job << " was admitted";
      EXPECT_GE(admitted_at, parse_time(ended)) << name;
    }
  }

  static constexpr const char* kCpuQuota = "1";  // CPUs: one job of the tests, never two
  std::vector<std::string> cluster_objects_;
};

// 4 pods x 200m: 800m of the ClusterQueue's 1 CPU.
const std::string kQueuedPsReplicas =
    "    PS: {replicas: 1, resources: {requests: {cpu: 200m}}}\n"
    "    Master: {replicas: 1, resources: {requests: {cpu: 200m}}}\n"
    "    Worker: {replicas: 1, resources: {requests: {cpu: 200m}}}\n"
    "    Evaluator: {replicas: 1, resources: {requests: {cpu: 200m}}}\n";
// 2 ranks x 400m.
const std::string kRanks = "    Worker: {replicas: 2, resources: {requests: {cpu: 400m}}}\n";

std::string in_queue(const std::string& priority_class = "") {
  std::string policy = "  runPolicy:\n    cleanPodPolicy: None\n    schedulingPolicy: {queue: team";
  if (!priority_class.empty()) policy += ", priorityClass: " + priority_class;
  return policy + "}\n";
}

TEST_F(Queues, TwoJobsForTheQuotaOfOneRunOneAfterTheOtherWhole) {
  data_and_checkpoint_volumes();
  const auto applied = Steady::now();
  submit("first", kPsSync, kQueuedPsReplicas, in_queue());
  const auto first_admission = ungated_after("first", applied);
  std::cerr << "job first: admitted (every pod ungated) " << first_admission
            << " s after it was applied\n";
  submit("second", kPsSync, kQueuedPsReplicas, in_queue());

  // The second waits whole: all of its pods made and gated, none placed, while the first runs;
  // its state says why, in Kueue's words.
  ASSERT_TRUE(wait_for([&] { return state("second") == "Queued" && pods_now("second").total == 4; },
                       seconds(60)))
      << diagnose("second");
  // "Pending" comes first without Kueue's why (the Workload is made, Kueue has not tried it
  // yet); Kueue's message follows once it has found the quota short.
  EXPECT_TRUE(wait_for(
      [&] {
        return reason_of("second") == "Pending" &&
               message_of("second").find("insufficient") != std::string::npos;
      },
      seconds(30)))
      << "reason " << reason_of("second") << ", message " << message_of("second");
  const auto listed = kubectl({"get", "ctj", "second", "-n", ns_}).output;
  EXPECT_NE(listed.find("Queued"), std::string::npos) << listed;
  EXPECT_NE(listed.find("Pending"), std::string::npos) << listed;
  // At every look until all its pods are ungated: either every pod gated and none placed, or
  // its Workload admitted whole (quota for all 4 pods) before any gate came off. Kueue lifts the
  // gates with a patch per pod, so a look may fall between two; the Workload is read after the
  // pods, and an admission is never taken back here (no preemption in this test).
  std::string partial;
  const auto first_running = Steady::now();
  bool admitted = false;
  while (!admitted && seconds_since(first_running) < 300) {
    const auto now = pods_now("second");
    if (now.gated != now.total || now.placed != 0) {
      if (const auto for_pods = admitted_pods("second"); for_pods != 4) {
        partial = std::to_string(now.placed) + " placed, " + std::to_string(now.gated) + "/" +
                  std::to_string(now.total) + " gated, the Workload admitted for " +
                  std::to_string(for_pods) + " pods";
        break;
      }
    }
    admitted = now.total == 4 && now.gated == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_TRUE(partial.empty()) << "the second job was admitted in part: " << partial;
  ASSERT_TRUE(admitted) << diagnose("second");
  EXPECT_EQ(admitted_pods("second"), 4);  // one Workload for the whole group
  std::cerr << "job second: admitted " << seconds_since(first_running)
            << " s after the first was\n";
  // Not before the first's trainers and parameter server had ended (Kueue takes the quota of a
  // group's succeeded pods back, so the first's evaluator may still have been running then).
  expect_admitted_after_they_ended("second", {"first-ps-0", "first-master-0", "first-worker-0"});
  ASSERT_TRUE(wait_for_state("first", "Succeeded", seconds(300))) << diagnose("first");
  ASSERT_TRUE(wait_for_state("second", "Succeeded", seconds(300))) << diagnose("second");
  EXPECT_TRUE(has_event("second", "JobAdmitted"));
  // Both groups ended, every pod of them (PS and evaluator too): nothing of the quota is held.
  EXPECT_TRUE(wait_for([&] { return admitted_workloads() == 0 && in_use() == "0"; }, seconds(60)))
      << "admitted " << admitted_workloads() << ", cpu in use " << in_use();
  EXPECT_EQ(status_of("first").value("restarts", -1), 0);
  EXPECT_EQ(status_of("second").value("restarts", -1), 0);
}

// A ClusterQueue whose quota is in GPUs (the cluster's GPU node: start.sh --gpus): two of them,
// and CPU enough for any job here.
class GpuQueues : public Queues {
 protected:
  [[nodiscard]] std::string quota_resources() const override { return "cpu, nvidia.com/gpu"; }
  [[nodiscard]] std::string quota() const override {
    return "{name: cpu, nominalQuota: 8}, {name: nvidia.com/gpu, nominalQuota: 2}";
  }
};

TEST_F(GpuQueues, TwoJobsOfTwoGpusForAQuotaOfTwoRunOneAfterTheOtherWhole) {
  data_and_checkpoint_volumes();
  device_ = "cpu";  // GPUs held, not there
  // Long enough to be running while the second is looked at (seconds after it is applied).
  submit("gpufirst", kAllReduce, gpu_workers(2, 1), in_queue(), "cifar10", kLongEnoughToInterrupt);
  std::cerr << "job gpufirst: admitted " << ungated_after("gpufirst", Steady::now())
            << " s after it was applied\n";
  submit("gpusecond", kAllReduce, gpu_workers(2, 1), in_queue());
  // The second waits whole, both pods gated, for the GPUs the first holds; Kueue says so.
  ASSERT_TRUE(wait_for(
      [&] {
        const auto now = pods_now("gpusecond");
        return state("gpusecond") == "Queued" && now.total == 2 && now.gated == 2 &&
               message_of("gpusecond").find("nvidia.com/gpu") != std::string::npos;
      },
      seconds(60)))
      << diagnose("gpusecond");
  std::cerr << "job gpusecond: " << reason_of("gpusecond") << ": " << message_of("gpusecond")
            << "\n";
  // The first's two GPUs in use (Kueue writes its ClusterQueue's usage a moment after admitting).
  EXPECT_TRUE(wait_for([&] { return in_use("nvidia.com/gpu") == "2"; }, seconds(30)))
      << in_use("nvidia.com/gpu");
  EXPECT_NE(state("gpufirst"), "Succeeded");  // (else the looks above came too late to mean much)
  ASSERT_TRUE(wait_for_state("gpufirst", "Succeeded", seconds(300))) << diagnose("gpufirst");
  // Read while the second runs: Kueue deletes a finished group's Workload with its pods (CI read
  // it once the second had ended, and it was gone).
  ungated_after("gpusecond", Steady::now());
  expect_admitted_after_they_ended("gpusecond", {"gpufirst-worker-0", "gpufirst-worker-1"});
  ASSERT_TRUE(wait_for_state("gpusecond", "Succeeded", seconds(300))) << diagnose("gpusecond");
  EXPECT_TRUE(wait_for([&] { return admitted_workloads() == 0 && in_use("nvidia.com/gpu") == "0"; },
                       seconds(60)))
      << "admitted " << admitted_workloads() << ", GPUs in use " << in_use("nvidia.com/gpu");
}

TEST_F(Queues, APreemptedJobIsNotChargedAndResumesFromItsCheckpoint) {
  constexpr int kLowEpochs = kLongEnoughToInterrupt;  // preempted mid-run, after a checkpoint
  data_and_checkpoint_volumes();
  checkpoint_every_steps_ = 0;  // once an epoch: the preemption's own save is what keeps the rest
  submit("low", kAllReduce, kRanks,
         in_queue(ns_ + "-low") + "    restartPolicy: OnFailure\n    backoffLimit: 0\n", "cifar10",
         kLowEpochs);
  ASSERT_TRUE(wait_until_training("low")) << diagnose("low");
  const auto dir = run_dir("low");
  ASSERT_TRUE(wait_for_checkpoint(dir)) << dir;

  // A higher-priority job that needs the quota: Kueue evicts the low one's whole group.
  const auto way_out = volumes_ / "low-worker-0.preempted.log";
  auto follower = follow_log("low-worker-0", way_out);
  std::this_thread::sleep_for(seconds(1));  // following
  const auto applied = Steady::now();
  submit("high", kAllReduce, kRanks, in_queue(ns_ + "-high"));
  ASSERT_TRUE(wait_for([&] { return reason_of("low") == "Preempted"; }, seconds(120)))
      << diagnose("low");
  std::cerr << "job low: preempted " << seconds_since(applied) << " s after job high was applied\n";
  EXPECT_EQ(state("low"), "Queued");
  EXPECT_TRUE(has_event("low", "Preempted"));
  const auto high_admission = ungated_after("high", applied);
  std::cerr << "job high: admitted " << high_admission << " s after it was applied\n";
  // The low job's pods come back, and wait gated and unplaced while the high one runs.
  EXPECT_TRUE(wait_for(
      [&] {
        const auto now = pods_now("low");
        return now.total == 2 && now.gated == 2;
      },
      seconds(120)))
      << diagnose("low");
  EXPECT_EQ(pods_now("low").placed, 0U);
  EXPECT_EQ(state("low"), "Queued");
  ASSERT_TRUE(wait_for_state("high", "Succeeded", seconds(300))) << diagnose("high");

  // Readmitted, it resumes from its checkpoint and ends Succeeded, charged nothing (backoffLimit
  // is 0: a counted restart would have failed it).
  ASSERT_TRUE(wait_for_state("low", "Succeeded", seconds(600))) << diagnose("low");
  EXPECT_EQ(status_of("low").value("restarts", -1), 0);
  EXPECT_TRUE(has_event("low", "JobAdmitted"));
  const auto rank0 = kubectl({"logs", "low-worker-0", "-n", ns_}).output;
  follower->wait();
  const auto cost = interruption("Kueue preemption of a 2-rank all-reduce job",
                                 cifar::testing::read_file(way_out), rank0);
  EXPECT_GT(cost.stopped_after, 0) << cifar::testing::read_file(way_out);
  EXPECT_GE(cost.resumed_from, cost.stopped_after - 1) << rank0;
  EXPECT_LE(cost.resumed_from, cost.stopped_after) << rank0;
  EXPECT_EQ(recorded_epochs(dir), every_epoch_once(kLowEpochs));
}

// A ClusterQueue of 800m CPU (and memory enough: the rendezvous store asks for some) for an
// elastic job whose own group (its store, 50m, and two workers of 300m) fits, and whose third
// worker (300m more) does not until the quota grows.
class ElasticQueues : public Queues {
 protected:
  [[nodiscard]] std::string quota_resources() const override { return "cpu, memory"; }
  [[nodiscard]] std::string quota() const override {
    return "{name: cpu, nominalQuota: 800m}, {name: memory, nominalQuota: 64Gi}";
  }
  void set_cpu_quota(const std::string& quota) {
    const auto patched =
        kubectl({"patch", "clusterqueue", ns_, "--type=json", "-p",
                 R"([{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/)"
                 R"(nominalQuota", "value": ")" +
                     quota + R"("}])"});
    ASSERT_EQ(patched.exit_code, 0) << patched.output;
  }
  json workers_status(const std::string& job) {
    return status_of(job).value("workers", json::object());
  }
};

// Enough epochs of the slice (20 steps each: a global batch of 3 x 25 that divides its 1500
// samples) for a worker to be admitted, join, and leave mid-run.
constexpr int kEpochsForAnAdmissionAndALeave = 16;

// Kueue v0.17 admits a plain pod group of a fixed size: an elastic job's fixed part (its store
// and minReplicas workers) is one group, admitted whole, and each worker above the minimum a group
// of one, admitted when the quota has room while the others train; a scale-down ends the
// worker's group and gives its quota back (docs/ARCHITECTURE.md, "Elastic jobs").
TEST_F(ElasticQueues, AWorkerBeyondTheQuotaWaitsWhileTheOthersTrainAndAScaleDownGivesItsQuotaBack) {
  submit_elastic("flex", kAllReduce,
                 "    Worker: {replicas: 3, minReplicas: 2, maxReplicas: 3, "
                 "resources: {requests: {cpu: 300m}}}\n",
                 in_queue(), kEpochsForAnAdmissionAndALeave);
  ASSERT_TRUE(wait_until_training("flex")) << diagnose("flex");
  // Workers 0 and 1 train as a world of 2; worker 2 waits, gated, and the job says why in Kueue's
  // words, once, while its state is Running (not Queued: its own group was admitted).
  EXPECT_TRUE(wait_for(
      [&] {
        const auto workers = workers_status("flex");
        return workers.value("reason", "") == "WaitingForAdmission" &&
               workers.value("message", "").find("flex-worker-2 waits in queue team") !=
                   std::string::npos &&
               workers.value("message", "").find("insufficient") != std::string::npos;
      },
      seconds(60)))
      << workers_status("flex").dump();
  EXPECT_EQ(state("flex"), "Running");
  EXPECT_TRUE(trains_in_a_world_of("flex-worker-0", 2)) << logs("flex-worker-0");
  EXPECT_FALSE(pod("flex-worker-2")["spec"].value("schedulingGates", json::array()).empty());
  EXPECT_NE(events("WaitingForAdmission").find("flex-worker-2 waits"), std::string::npos)
      << events("WaitingForAdmission");
  EXPECT_EQ(in_use(), "650m");  // the store and two workers

  // The quota grows: Kueue admits worker 2's group, and it joins the two at a step boundary.
  const auto grown = Steady::now();
  set_cpu_quota("1");
  EXPECT_TRUE(wait_for([&] { return trains_in_a_world_of("flex-worker-2", 3); }, seconds(120)))
      << logs("flex-worker-2") << diagnose("flex");
  std::cerr << "flex-worker-2: training in a world of 3 " << seconds_since(grown)
            << " s after the quota grew\n";
  EXPECT_TRUE(world_becomes("flex", json{0, 1, 2}, seconds(30))) << status_of("flex").dump();
  EXPECT_TRUE(
      wait_for([&] { return workers_status("flex").value("reason", "").empty(); }, seconds(30)))
      << workers_status("flex").dump();
  EXPECT_EQ(in_use(), "950m");

  // Scaled down: worker 2 leaves at a step boundary, its group ends, and Kueue has its quota
  // again while the two train on.
  const auto shrunk = Steady::now();
  ASSERT_EQ(scale("flex", 2), 0);
  EXPECT_TRUE(wait_for([&] { return !pod_exists("flex-worker-2"); }, seconds(90)))
      << diagnose("flex");
  EXPECT_TRUE(wait_for([&] { return in_use() == "650m"; }, seconds(60))) << in_use();
  std::cerr << "flex-worker-2: its quota back " << seconds_since(shrunk)
            << " s after the scale-down\n";
  EXPECT_TRUE(world_becomes("flex", json{0, 1}, seconds(60))) << status_of("flex").dump();
  EXPECT_EQ(state("flex"), "Running") << diagnose("flex");

  ASSERT_TRUE(wait_for_state("flex", "Succeeded", seconds(600))) << diagnose("flex");
  EXPECT_EQ(restart_count("flex-worker-0"), 0);
  EXPECT_EQ(restart_count("flex-worker-1"), 0);
  EXPECT_EQ(status_of("flex").value("restarts", -1), 0) << status_of("flex").dump();
  expect_every_epoch_to_train_each_sample_once("flex", kEpochsForAnAdmissionAndALeave);
  // The job ended: every group with it, nothing of the quota held.
  EXPECT_TRUE(wait_for([&] { return admitted_workloads() == 0 && in_use() == "0"; }, seconds(60)))
      << "admitted " << admitted_workloads() << ", cpu in use " << in_use();
}

}  // namespace
}  // namespace cifar::e2e
