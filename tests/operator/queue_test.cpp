// A job in a Kueue queue (cifartrainjob/reconcile.h): what Kueue's Workload says
// (framework/kueue.h), the pod group's labels on every pod, and a queued job's life as reconcile
// sees it: Queued with Kueue's reason while its pods are gated, its clock and its pods' startup
// deadlines from the admission, a preemption that is not counted as a restart, the ended Workload
// deleted before the pods come back, a failed pod of an admitted group released from Kueue's
// finalizer so that it can be replaced under its name. Pure, fixed clock.
#include <gtest/gtest.h>

#include <algorithm>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/kueue_integration.h"
#include "cifartrainjob/reconcile.h"
#include "framework/kueue.h"
#include "tests/operator/fixtures.h"

namespace cifar::op::queue_test {
namespace {

using nlohmann::json;
using std::chrono::seconds;

using testing::kT0;
const std::string kGroup = "j-0123abcd";  // <job>-<8 characters of the uid>

Job make_job(const std::string& queue = "team-a") {
  json spec = json::parse(R"({"image": "i", "model": {"name": "resnet20"},
    "dataset": {"name": "cifar10"}, "strategy": {"type": "ParameterServer"},
    "replicaSpecs": {"PS": {"replicas": 1}, "Master": {"replicas": 1},
                     "Worker": {"replicas": 2}},
    "checkpoint": {"volume": {"claimName": "checkpoints"}},
    "runPolicy": {"restartPolicy": "ExitCode", "backoffLimit": 3}})");
  spec["runPolicy"]["schedulingPolicy"] = {{"queue", queue}};
  return Job{"j", "ns", "0123abcd-5678-90ef-1234-567890abcdef", parse_spec(spec), ""};
}

// A pod as Kueue's webhook leaves it (labelled, its finalizer on), created at kT0, `gated` or
// running.
json as_kueue_pod(json p, bool gated, const std::string& uid) {
  p["metadata"]["creationTimestamp"] = format_time(kT0);
  p["metadata"]["uid"] = uid;
  p["metadata"]["labels"][std::string(kueue::kManagedLabel)] = "true";
  p["metadata"]["finalizers"] = {std::string(kueue::kPodFinalizer)};
  if (gated) {
    p["spec"]["schedulingGates"] = {{{"name", "kueue.x-k8s.io/admission"}}};
    p["status"] = {
        {"phase", "Pending"},
        {"conditions",
         {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "SchedulingGated"}}}}};
  } else {
    p["spec"]["nodeName"] = "node-1";
    p["status"] = {{"phase", "Running"},
                   {"containerStatuses",
                    {{{"name", "cifar-train"}, {"state", {{"running", json::object()}}}}}}};
  }
  return p;
}

// The job's pods as Kueue's webhook leaves them, `gated` or running.
std::vector<json> kueue_pods(const Job& job, bool gated) {
  std::vector<json> pods;
  int i = 0;
  for (auto& p : desired_pods(job)) {
    pods.push_back(as_kueue_pod(std::move(p), gated, "pod-" + std::to_string(i++)));
  }
  return pods;
}

// Kueue's Workload of the group, as the API server returns it.
json workload(const json& conditions, bool deleting = false) {
  json w = {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
            {"kind", "Workload"},
            {"metadata",
             {{"name", kGroup},
              {"namespace", "ns"},
              {"annotations", {{"kueue.x-k8s.io/is-group-workload", "true"}}},
              {"ownerReferences", {{{"kind", "Pod"}, {"name", "j-ps-0"}}}},
              {"managedFields", json::array({json::object()})}}},
            {"spec", {{"queueName", "team-a"}, {"podSets", json::array()}}},
            {"status", {{"conditions", conditions}}}};
  if (deleting) w["metadata"]["deletionTimestamp"] = format_time(kT0);
  return w;
}

json condition(const std::string& type, const std::string& status, const std::string& reason,
               const std::string& message, Clock::time_point at = kT0) {
  return {{"type", type},
          {"status", status},
          {"reason", reason},
          {"message", message},
          {"lastTransitionTime", format_time(at)}};
}

const std::string kNoQuota =
    "couldn't assign flavors to pod set 1a2b3c4d: insufficient unused quota for cpu in flavor "
    "default, 2 more needed";

json pending() {
  return workload(json::array({condition("QuotaReserved", "False", "Pending", kNoQuota)}));
}
json admitted(Clock::time_point at) {
  return workload(json::array({condition("QuotaReserved", "True", "QuotaReserved", "reserved", at),
                               condition("Admitted", "True", "Admitted", "admitted", at)}));
}
json preempted() {
  // As Kueue leaves it while the group's pods are stopped: still Admitted, Evicted since.
  return workload(json::array(
      {condition("QuotaReserved", "True", "QuotaReserved", "reserved"),
       condition("Admitted", "True", "Admitted", "admitted"),
       condition("Evicted", "True", "Preempted",
                 "Preempted to accommodate a workload (UID: 9) due to prioritization in the "
                 "ClusterQueue",
                 kT0 + seconds(60))}));
}
json finished() {
  return workload(
      json::array({condition("Evicted", "True", "Preempted", "preempted"),
                   condition("Finished", "True", "Succeeded", "Pods succeeded: 0/5.")}));
}

Observed observe(std::vector<json> pods, const std::optional<json>& w) {
  auto o = testing::no_pods();
  o.pods = std::move(pods);
  if (w) o.workload = kueue::workload_state(*w);
  return o;
}

bool has_event(const Plan& plan, std::string_view reason) {
  return std::any_of(plan.events.begin(), plan.events.end(),
                     [&](const EventRecord& e) { return e.reason == reason; });
}

TEST(KueueWorkload, ReadsWhyAWorkloadWaits) {
  const auto state = kueue::workload_state(pending());
  EXPECT_FALSE(state.quota_reserved);
  EXPECT_FALSE(state.admitted);
  EXPECT_EQ(state.waiting_reason, "Pending");
  EXPECT_EQ(state.waiting_message, kNoQuota);
  EXPECT_FALSE(state.evicted || state.finished || state.deleting);
}

TEST(KueueWorkload, ReadsAdmissionEvictionEndAndDeletion) {
  const auto in = kueue::workload_state(admitted(kT0 + seconds(7)));
  EXPECT_TRUE(in.quota_reserved && in.admitted);
  EXPECT_EQ(in.admitted_since, to_time(kT0 + seconds(7)));
  const auto out = kueue::workload_state(preempted());
  EXPECT_TRUE(out.evicted);
  // Readmitted after an eviction: the old Evicted condition no longer counts.
  auto again = preempted();
  again["status"]["conditions"][1]["lastTransitionTime"] = format_time(kT0 + seconds(90));
  EXPECT_FALSE(kueue::workload_state(again).evicted);
  EXPECT_EQ(out.eviction_reason, "Preempted");
  EXPECT_NE(out.eviction_message.find("prioritization"), std::string::npos);
  EXPECT_TRUE(kueue::workload_state(finished()).finished);
  EXPECT_TRUE(kueue::workload_state(workload(json::array(), true)).deleting);
}

TEST(KueueWorkload, TrimKeepsConditionsAndNameOnly) {
  auto w = finished();
  kueue::trim_workload(w);
  EXPECT_FALSE(w.contains("spec"));
  EXPECT_FALSE(w["metadata"].contains("managedFields"));
  EXPECT_FALSE(w["metadata"].contains("ownerReferences"));
  EXPECT_EQ(w["metadata"]["name"], kGroup);
  EXPECT_TRUE(kueue::workload_state(w).finished);
}

TEST(KueuePods, AWorkloadNamesItsJob) {
  // The inverse of pod_group_name, from the name alone: a Workload's job, once its pods are gone.
  EXPECT_EQ(job_name_of_pod_group(pod_group_name(make_job())), "j");
  EXPECT_EQ(job_name_of_pod_group("my-job-0123abcd"), "my-job");
  EXPECT_EQ(job_name_of_pod_group(std::string(51, 'a') + "-0123abcd"), std::string(51, 'a'));
  // Names pod_group_name does not make.
  EXPECT_EQ(job_name_of_pod_group(""), std::nullopt);
  EXPECT_EQ(job_name_of_pod_group("0123abcd"), std::nullopt);
  EXPECT_EQ(job_name_of_pod_group("-0123abcd"), std::nullopt);  // no job name
  EXPECT_EQ(job_name_of_pod_group("j_0123abcd"), std::nullopt);
  EXPECT_EQ(job_name_of_pod_group("j-0123abc"), std::nullopt);  // the uid's prefix too short
}

TEST(KueuePods, EveryPodCarriesTheGroup) {
  const auto job = make_job();
  EXPECT_EQ(pod_group_name(job), kGroup);
  const auto pods = desired_pods(job);
  ASSERT_EQ(pods.size(), 4U);
  for (const auto& p : pods) {
    const auto& m = p["metadata"];
    EXPECT_EQ(m["labels"][std::string(kueue::kQueueNameLabel)], "team-a");
    EXPECT_EQ(m["labels"][std::string(kueue::kPodGroupNameLabel)], kGroup);
    EXPECT_EQ(m["annotations"][std::string(kueue::kPodGroupTotalCountAnnotation)], "4");
    EXPECT_EQ(m["annotations"][std::string(kueue::kRetriableInGroupAnnotation)], "false");
  }
  // Without a queue, nothing of Kueue's.
  const auto plain = desired_pod(make_job(""), Role::kMaster, 0);
  EXPECT_FALSE(plain["metadata"]["labels"].contains(std::string(kueue::kQueueNameLabel)));
  EXPECT_FALSE(plain["metadata"].contains("annotations"));
}

// Topology Aware Scheduling: every pod asks for the job's level alike, under one pod-set group
// name, so that Kueue keeps the PS, the chief and the workers (each a pod set of its own shape)
// in one domain.
TEST(KueuePods, EveryPodCarriesTheTopologyRequest) {
  for (const bool required : {true, false}) {
    auto job = make_job();
    job.spec.topology = JobSpec::Topology{required, "cifartrain.io/rack"};
    const auto asked = std::string(required ? kueue::kPodSetRequiredTopologyAnnotation
                                            : kueue::kPodSetPreferredTopologyAnnotation);
    const auto other = std::string(required ? kueue::kPodSetPreferredTopologyAnnotation
                                            : kueue::kPodSetRequiredTopologyAnnotation);
    for (const auto& p : desired_pods(job)) {
      const auto& annotations = p["metadata"]["annotations"];
      EXPECT_EQ(annotations.value(asked, ""), "cifartrain.io/rack");
      EXPECT_FALSE(annotations.contains(other));
      EXPECT_EQ(annotations.value(std::string(kueue::kPodSetGroupNameAnnotation), ""), kGroup);
    }
  }
  // Without a topology, no such annotation.
  const auto plain = desired_pod(make_job(), Role::kMaster, 0)["metadata"]["annotations"];
  EXPECT_FALSE(plain.contains(std::string(kueue::kPodSetRequiredTopologyAnnotation)));
  EXPECT_FALSE(plain.contains(std::string(kueue::kPodSetGroupNameAnnotation)));
}

TEST(KueuePods, TheReleasePatchTakesOnlyKueuesFinalizer) {
  EXPECT_EQ(kueue::release_patch(),
            json::parse(R"({"metadata": {"$deleteFromPrimitiveList/finalizers":
                                         ["kueue.x-k8s.io/managed"]}})"));
  auto p = kueue_pods(make_job(), true)[0];
  EXPECT_TRUE(kueue::holds(p) && kueue::managed(p));
  p["metadata"]["finalizers"] = {"other"};
  EXPECT_FALSE(kueue::holds(p));
}

TEST(QueuedJob, WaitsWithKueuesReasonAndItsClockStands) {
  const auto job = make_job();
  // The first round makes the pods: they are the group Kueue waits for.
  auto plan = reconcile(job, JobStatus{}, observe({}, std::nullopt), kT0);
  EXPECT_EQ(plan.create_pods.size(), 4U);
  EXPECT_EQ(plan.status.state, ConditionType::kQueued);
  EXPECT_EQ(plan.status.condition(ConditionType::kQueued)->reason, reason::kWaitingForWorkload);
  EXPECT_FALSE(plan.status.start_time);
  EXPECT_TRUE(has_event(plan, reason::kWaitingForWorkload));
  // Gated, the Workload pending on quota: Kueue's reason and words, in the REASON column.
  const auto later = kT0 + seconds(3600);  // long past the startup deadline: gated pods have none
  auto waiting = reconcile(job, plan.status, observe(kueue_pods(job, true), pending()), later);
  EXPECT_TRUE(waiting.create_pods.empty());
  EXPECT_EQ(waiting.status.state, ConditionType::kQueued);
  EXPECT_EQ(waiting.status.summary_reason, "Pending");
  EXPECT_NE(waiting.status.summary_message->find(kNoQuota), std::string::npos);
  EXPECT_NE(waiting.status.summary_message->find("queue team-a"), std::string::npos);
  EXPECT_FALSE(waiting.status.start_time);
  EXPECT_FALSE(waiting.status.finished());
  EXPECT_TRUE(has_event(waiting, "Pending"));
  // The same wait a moment later is no news.
  auto again =
      reconcile(job, waiting.status, observe(kueue_pods(job, true), pending()), later + seconds(5));
  EXPECT_TRUE(again.events.empty());
}

TEST(QueuedJob, AWorkloadKueueHasNotTriedYetSaysSoThenGivesKueuesWhy) {
  const auto job = make_job();
  const auto made = reconcile(job, JobStatus{}, observe({}, std::nullopt), kT0);
  // The Workload exists, without a QuotaReserved condition: Kueue has not looked at it yet.
  auto untried =
      reconcile(job, made.status, observe(kueue_pods(job, true), workload(json::array())), kT0);
  EXPECT_EQ(untried.status.state, ConditionType::kQueued);
  EXPECT_EQ(untried.status.summary_reason, "Pending");
  EXPECT_NE(untried.status.summary_message->find("Kueue has not tried to admit it yet"),
            std::string::npos)
      << *untried.status.summary_message;
  // Then Kueue's why replaces it.
  auto pending_now =
      reconcile(job, untried.status, observe(kueue_pods(job, true), pending()), kT0 + seconds(1));
  EXPECT_EQ(pending_now.status.summary_reason, "Pending");
  EXPECT_NE(pending_now.status.summary_message->find(kNoQuota), std::string::npos);
}

TEST(QueuedJob, AdmissionStartsTheClockAndTheStartupDeadlines) {
  const auto job = make_job();  // startupDeadlineSeconds 600
  JobStatus queued;
  queued.set_state(ConditionType::kQueued, "Pending", "waits", to_time(kT0));
  const auto at = kT0 + seconds(1000);  // admitted after 1000 s in the queue
  // Ungated, not started yet 590 s after the admission (1590 s after creation): no failure.
  auto pods = kueue_pods(job, true);
  for (auto& p : pods) {
    p["spec"].erase("schedulingGates");
    p["status"] = {{"phase", "Pending"}};
  }
  auto plan = reconcile(job, queued, observe(pods, admitted(at)), at + seconds(590));
  EXPECT_FALSE(plan.status.finished());
  EXPECT_EQ(plan.status.condition(ConditionType::kQueued)->reason, reason::kJobAdmitted);
  EXPECT_NE(plan.status.condition(ConditionType::kQueued)->message.find("after 1590 s"),
            std::string::npos);
  EXPECT_EQ(plan.status.start_time, to_time(at + seconds(590)));
  EXPECT_TRUE(has_event(plan, reason::kJobAdmitted));
  // 600 s after the admission it fails as any pod that does not start.
  auto late = reconcile(job, plan.status, observe(pods, admitted(at)), at + seconds(601));
  EXPECT_TRUE(late.status.is_true(ConditionType::kFailed));
  EXPECT_EQ(late.status.summary_reason, reason::kStartupDeadlineExceeded);
  // Running: the state follows.
  auto running =
      reconcile(job, plan.status, observe(kueue_pods(job, false), admitted(at)), at + seconds(600));
  EXPECT_EQ(running.status.state, ConditionType::kRunning);
}

TEST(QueuedJob, APreemptionIsNoRestartAndTheGroupQueuesAgain) {
  const auto job = make_job();
  const auto running = testing::running_since(kT0);
  // Kueue evicted the group: it deletes the pods, which end with SIGTERM.
  auto pods = kueue_pods(job, false);
  for (auto& p : pods) {
    p["metadata"]["deletionTimestamp"] = format_time(kT0 + seconds(60));
    p["status"]["phase"] = "Failed";
    p["status"]["containerStatuses"][0]["state"] = {{"terminated", {{"exitCode", 143}}}};
  }
  const auto t1 = kT0 + seconds(61);
  auto evicted = reconcile(job, running, observe(pods, preempted()), t1);
  EXPECT_EQ(evicted.status.state, ConditionType::kQueued);
  EXPECT_EQ(evicted.status.summary_reason, reason::kPreempted);
  EXPECT_NE(evicted.status.summary_message->find("prioritization"), std::string::npos);
  EXPECT_EQ(evicted.restarts, 0);
  EXPECT_EQ(evicted.status.restarts, 0);
  EXPECT_TRUE(evicted.delete_pods.empty());
  EXPECT_TRUE(evicted.create_pods.empty());    // they are still there
  EXPECT_FALSE(evicted.status.start_time);     // the clock starts again at the readmission
  EXPECT_EQ(evicted.release_pods.size(), 4U);  // ended and leaving: Kueue need not hold them
  ASSERT_TRUE(has_event(evicted, reason::kPreempted));
  EXPECT_EQ(std::find_if(evicted.events.begin(), evicted.events.end(),
                         [](const EventRecord& e) { return e.reason == reason::kPreempted; })
                ->type,
            "Warning");
  // The pods are gone and the Workload ended: it goes first, no pod is made while it is there.
  auto requeuing = reconcile(job, evicted.status, observe({}, finished()), t1 + seconds(5));
  EXPECT_EQ(requeuing.delete_workloads, std::vector<std::string>{kGroup});
  EXPECT_TRUE(requeuing.create_pods.empty());
  EXPECT_EQ(requeuing.status.summary_reason, reason::kPreempted);  // until admitted again
  auto deleting =
      reconcile(job, requeuing.status, observe({}, workload(json::array(), true)), t1 + seconds(6));
  EXPECT_TRUE(deleting.delete_workloads.empty());  // asked already
  EXPECT_TRUE(deleting.create_pods.empty());
  // Gone: the pods come back, and wait to be admitted again.
  auto back = reconcile(job, deleting.status, observe({}, std::nullopt), t1 + seconds(8));
  EXPECT_EQ(back.create_pods.size(), 4U);
  EXPECT_EQ(back.status.summary_reason, reason::kPreempted);
  auto waits =
      reconcile(job, back.status, observe(kueue_pods(job, true), pending()), t1 + seconds(9));
  EXPECT_EQ(waits.status.summary_reason, reason::kPreempted);
  EXPECT_NE(waits.status.summary_message->find(kNoQuota), std::string::npos);
  auto readmitted = reconcile(job, waits.status, observe(kueue_pods(job, false), admitted(kT0)),
                              t1 + seconds(100));
  EXPECT_EQ(readmitted.status.state, ConditionType::kRunning);
  EXPECT_EQ(readmitted.status.restarts, 0);
  EXPECT_EQ(readmitted.restarts, 0);
}

TEST(QueuedJob, ThePodsKueueStoppedSayItWasAPreemption) {
  const auto job = make_job();
  const auto running = testing::running_since(kT0);
  // The Workload ended with its pods and says nothing of the eviction: the pods do.
  auto pods = kueue_pods(job, false);
  for (auto& p : pods) {
    p["metadata"]["deletionTimestamp"] = format_time(kT0);
    p["status"]["phase"] = "Failed";
    p["status"]["conditions"] = {{{"type", "TerminationTarget"},
                                  {"status", "True"},
                                  {"reason", "WorkloadEvictedDueToPreempted"},
                                  {"message", "Preempted to accommodate a workload (UID: 9)"}}};
  }
  const auto ended = workload(json::array({condition("Finished", "True", "Succeeded", "0/5")}));
  auto plan = reconcile(job, running, observe(pods, ended), kT0 + seconds(1));
  EXPECT_EQ(plan.status.summary_reason, reason::kPreempted);
  EXPECT_NE(plan.status.summary_message->find("Preempted to accommodate"), std::string::npos);
  EXPECT_EQ(plan.delete_workloads, std::vector<std::string>{kGroup});
  // Held past their grace period by Kueue's finalizer, which this round takes off: not stuck.
  EXPECT_EQ(plan.release_pods.size(), 4U);
  EXPECT_FALSE(plan.status.is_true(ConditionType::kPodsNotReady));
}

TEST(QueuedJob, AFailedPodOfAnAdmittedGroupIsReleasedAndReplaced) {
  const auto job = make_job();
  const auto running = testing::running_since(kT0);
  auto pods = kueue_pods(job, false);
  pods[2]["status"] = {{"phase", "Failed"},
                       {"containerStatuses", {{{"state", {{"terminated", {{"exitCode", 137}}}}}}}}};
  auto plan = reconcile(job, running, observe(pods, admitted(kT0)), kT0 + seconds(30));
  const auto name = pods[2]["metadata"]["name"].get<std::string>();
  EXPECT_EQ(plan.delete_pods, std::vector<std::string>{name});
  EXPECT_EQ(plan.release_pods, std::vector<std::string>{name});
  EXPECT_EQ(plan.status.restarts, 1);  // a failure of the job's own: counted
  EXPECT_EQ(plan.status.state, ConditionType::kRestarting);
  // Its replacement, gated a moment until Kueue lets it join the admitted group: no Queued.
  pods[2] = kueue_pods(job, true)[2];
  auto back = reconcile(job, plan.status, observe(pods, admitted(kT0)), kT0 + seconds(31));
  EXPECT_NE(back.status.state, ConditionType::kQueued);
  EXPECT_TRUE(back.delete_workloads.empty());
}

TEST(QueuedJob, AnEndedAdmissionIsNotDeletedWithAFinishedJobsPods) {
  const auto job = make_job();
  const auto running = testing::running_since(kT0);
  // Every pod failed for good: the job fails, and Kueue's finished Workload stays (deleting it
  // would make Kueue delete the pods cleanPodPolicy keeps).
  auto pods = kueue_pods(job, false);
  for (auto& p : pods) {
    p["status"] = {{"phase", "Failed"},
                   {"containerStatuses", {{{"state", {{"terminated", {{"exitCode", 1}}}}}}}}};
  }
  auto plan = reconcile(job, running, observe(pods, finished()), kT0 + seconds(30));
  EXPECT_TRUE(plan.status.is_true(ConditionType::kFailed));
  EXPECT_TRUE(plan.delete_workloads.empty());
  EXPECT_TRUE(plan.create_pods.empty());
}

TEST(QueuedJob, WaitsForTheWorkloadCacheBeforeMakingPods) {
  auto observed = observe({}, std::nullopt);
  observed.workload_known = false;
  auto plan = reconcile(make_job(), JobStatus{}, observed, kT0);
  EXPECT_TRUE(plan.create_pods.empty());
  EXPECT_EQ(plan.status.state, ConditionType::kQueued);
  EXPECT_NE(plan.status.summary_message->find("is Kueue installed?"), std::string::npos);
  EXPECT_TRUE(plan.requeue_after);
}

TEST(QueuedJob, PodsKueueDidNotTakeAreSaidOnce) {
  const auto job = make_job();
  auto pods = kueue_pods(job, false);
  for (auto& p : pods) {
    p["metadata"]["labels"].erase(std::string(kueue::kManagedLabel));
    p["metadata"].erase("finalizers");
  }
  JobStatus queued;
  queued.set_state(ConditionType::kQueued, reason::kWaitingForWorkload, "w", to_time(kT0));
  auto plan = reconcile(job, queued, observe(pods, std::nullopt), kT0 + seconds(5));
  EXPECT_EQ(plan.status.state, ConditionType::kRunning);
  const auto* c = plan.status.condition(ConditionType::kQueued);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, ConditionStatus::kFalse);
  EXPECT_EQ(c->reason, reason::kNotManagedByQueue);
  EXPECT_TRUE(has_event(plan, reason::kNotManagedByQueue));
  EXPECT_FALSE(has_event(plan, reason::kJobAdmitted));  // it was never admitted
  auto again = reconcile(job, plan.status, observe(pods, std::nullopt), kT0 + seconds(10));
  EXPECT_FALSE(has_event(again, reason::kNotManagedByQueue));
}

// An elastic all-reduce job in a queue: 3 workers wanted, 2 to 4 allowed.
Job make_elastic_job() {
  json spec = json::parse(R"({"image": "i", "model": {"name": "resnet20"},
    "dataset": {"name": "cifar10"}, "strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 3, "minReplicas": 2, "maxReplicas": 4}},
    "checkpoint": {"volume": {"claimName": "checkpoints"}},
    "runPolicy": {"schedulingPolicy": {"queue": "team-a"}}})");
  return Job{"j", "ns", "0123abcd-5678-90ef-1234-567890abcdef", parse_spec(spec), ""};
}

std::string group_of(const json& pod) {
  return pod["metadata"]["labels"].value(std::string(kueue::kPodGroupNameLabel), "");
}
std::string group_size_of(const json& pod) {
  return pod["metadata"]["annotations"].value(std::string(kueue::kPodGroupTotalCountAnnotation),
                                              "");
}

// Kueue admits a plain pod group of a fixed size, so an elastic job's fixed part (its store and
// minReplicas workers) is its group, and each worker above the minimum a group of one.
TEST(KueuePods, AnElasticJobsWorkersAboveTheMinimumAreGroupsOfTheirOwn) {
  const auto job = make_elastic_job();
  const auto store = desired_rendezvous_store(job);
  EXPECT_EQ(group_of(store), kGroup);
  EXPECT_EQ(group_size_of(store), "3");  // the store and workers 0 and 1
  EXPECT_EQ(store["metadata"]["labels"].value(std::string(kueue::kQueueNameLabel), ""), "team-a");
  for (const int index : {0, 1}) {
    const auto worker = desired_pod(job, Role::kWorker, index);
    EXPECT_EQ(group_of(worker), kGroup);
    EXPECT_EQ(group_size_of(worker), "3");
  }
  for (const int index : {2, 3}) {
    const auto worker = desired_pod(job, Role::kWorker, index);
    EXPECT_EQ(group_of(worker), "j-0123ab-" + std::to_string(index));
    EXPECT_EQ(group_size_of(worker), "1");
    EXPECT_EQ(worker["metadata"]["annotations"].value(
                  std::string(kueue::kRetriableInGroupAnnotation), ""),
              "false");
  }
  // A Workload of a worker's group names its job, and the longest name is a label value still.
  EXPECT_EQ(job_name_of_pod_group(worker_pod_group_name(job, 3)), "j");
  auto longest = job;
  longest.name = std::string(51, 'a');
  EXPECT_EQ(worker_pod_group_name(longest, 1023).size(), 63U);
  EXPECT_EQ(job_name_of_pod_group(worker_pod_group_name(longest, 1023)), longest.name);
  EXPECT_EQ(job_name_of_pod_group("j-0123ab-12345"), std::nullopt);  // an index of 5 digits
  EXPECT_EQ(job_name_of_pod_group("j-0123a-2"), std::nullopt);       // the uid's prefix too short
  EXPECT_EQ(job_name_of_pod_group("-0123ab-2"), std::nullopt);       // no job name
  EXPECT_EQ(job_name_of_pod_group("j-0123ab-x"), std::nullopt);
}

// The elastic job's pods as Kueue leaves them: its group admitted (store, workers 0 and 1
// running), worker 2 gated in a group of its own.
std::vector<json> elastic_pods(const Job& job) {
  std::vector<json> pods = {as_kueue_pod(desired_rendezvous_store(job), false, "store")};
  for (const int index : {0, 1, 2}) {
    pods.push_back(as_kueue_pod(desired_pod(job, Role::kWorker, index), index == 2,
                                "worker-" + std::to_string(index)));
  }
  return pods;
}

TEST(QueuedJob, AnElasticJobTrainsWhileAWorkerAboveTheMinimumWaitsForAdmission) {
  const auto job = make_elastic_job();
  auto observed = observe(elastic_pods(job), admitted(kT0));
  observed.worker_workloads[2] = kueue::workload_state(pending());
  auto plan = reconcile(job, testing::running_since(kT0), observed, kT0 + seconds(30));
  // The job is not Queued: its own group is admitted and trains.
  EXPECT_EQ(plan.status.state, ConditionType::kRunning);
  EXPECT_TRUE(plan.create_pods.empty());
  ASSERT_TRUE(plan.status.workers);
  EXPECT_EQ(plan.status.workers->reason, reason::kWaitingForAdmission);
  const auto& message = plan.status.workers->message;
  EXPECT_NE(message.find("j-worker-2 waits in queue team-a for Kueue to admit it (its group "
                         "j-0123ab-2 waits: " +
                         kNoQuota + ")"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("the others train on"), std::string::npos) << message;
  EXPECT_TRUE(has_event(plan, reason::kWaitingForAdmission));
  // Said once as it starts waiting, not at every round.
  auto again = reconcile(job, plan.status, observed, kT0 + seconds(35));
  EXPECT_EQ(again.status.workers->reason, reason::kWaitingForAdmission);
  EXPECT_FALSE(has_event(again, reason::kWaitingForAdmission));
  // Before Kueue made its Workload, that is said.
  observed.worker_workloads.clear();
  const auto unmade = reconcile(job, plan.status, observed, kT0 + seconds(40));
  EXPECT_NE(unmade.status.workers->message.find("Kueue has not made the Workload of its group "
                                                "j-0123ab-2 yet"),
            std::string::npos)
      << unmade.status.workers->message;
  // Admitted, the gate is off: nothing waits.
  auto pods = elastic_pods(job);
  pods[3] = as_kueue_pod(desired_pod(job, Role::kWorker, 2), false, "worker-2");
  auto admitted_now = observe(pods, admitted(kT0));
  admitted_now.worker_workloads[2] = kueue::workload_state(admitted(kT0 + seconds(45)));
  const auto joined = reconcile(job, plan.status, admitted_now, kT0 + seconds(45));
  EXPECT_NE(joined.status.workers->reason, reason::kWaitingForAdmission);
  EXPECT_EQ(joined.status.workers->message, "");
}

std::vector<std::string> names_of(const std::vector<json>& pods) {
  std::vector<std::string> names;
  names.reserve(pods.size());
  for (const auto& p : pods) names.push_back(p["metadata"]["name"]);
  std::sort(names.begin(), names.end());
  return names;
}

// Made with the job's group, a worker above the minimum could be admitted first, with quota the
// job's group then lacks (seen on the cluster): it is made once the job's group is admitted, and
// goes while the job waits in its queue again.
TEST(QueuedJob, AnElasticJobsWorkersAboveTheMinimumAreMadeOnceItsOwnGroupIsAdmitted) {
  const auto job = make_elastic_job();
  const auto first = reconcile(job, JobStatus{}, observe({}, std::nullopt), kT0);
  EXPECT_EQ(names_of(first.create_pods),
            (std::vector<std::string>{"j-rendezvous", "j-worker-0", "j-worker-1"}));
  // The job's group made and waiting: still not.
  auto pods = elastic_pods(job);
  pods.pop_back();
  for (auto& p : pods) p = as_kueue_pod(p, /*gated=*/true, p["metadata"]["uid"]);
  const auto waiting = reconcile(job, first.status, observe(pods, pending()), kT0 + seconds(5));
  EXPECT_EQ(waiting.status.state, ConditionType::kQueued);
  EXPECT_TRUE(waiting.create_pods.empty());
  // Admitted: worker 2 is made, in its own group.
  pods = elastic_pods(job);
  pods.pop_back();
  const auto admitted_now =
      reconcile(job, testing::running_since(kT0), observe(pods, admitted(kT0)), kT0 + seconds(10));
  EXPECT_EQ(names_of(admitted_now.create_pods), std::vector<std::string>{"j-worker-2"});
  // Kueue evicted the job's group: worker 2, admitted on its own, goes too.
  auto evicted = reconcile(job, testing::running_since(kT0),
                           observe(elastic_pods(job), preempted()), kT0 + seconds(70));
  EXPECT_EQ(evicted.status.state, ConditionType::kQueued);
  EXPECT_TRUE(listed(evicted.delete_pods, "j-worker-2"));
  EXPECT_TRUE(has_event(evicted, reason::kWorkerLeaving));
  EXPECT_TRUE(evicted.create_pods.empty());
}

// A worker above the minimum admitted long after it was made has its startup deadline from its
// own admission, not from the job's.
TEST(QueuedJob, AnElasticWorkersStartupDeadlineCountsFromItsOwnAdmission) {
  auto job = make_elastic_job();
  job.spec.startup_deadline_seconds = 300;
  auto pods = elastic_pods(job);
  // Ungated 1000 s after it was made, and not started yet (being scheduled).
  pods[3]["spec"].erase("schedulingGates");
  pods[3]["status"] = {{"phase", "Pending"}};
  auto observed = observe(pods, admitted(kT0));
  observed.worker_workloads[2] = kueue::workload_state(admitted(kT0 + seconds(1000)));
  const auto plan = reconcile(job, testing::running_since(kT0), observed, kT0 + seconds(1010));
  EXPECT_EQ(plan.status.state, ConditionType::kRunning) << plan.status.summary_message.value_or("");
  // Past its own deadline it fails the job as any pod's would.
  const auto late = reconcile(job, testing::running_since(kT0), observed, kT0 + seconds(1310));
  EXPECT_EQ(late.status.state, ConditionType::kFailed);
}

// A worker above the minimum that left (scaled down, failed, preempted) ended its group's
// admission: before it is made again the ended Workload goes, so that it queues anew.
TEST(QueuedJob, AnElasticWorkerIsMadeAgainOnlyOnceTheWorkloadOfItsEndedAdmissionIsGone) {
  const auto job = make_elastic_job();
  auto pods = elastic_pods(job);
  pods.pop_back();  // worker 2 is gone
  const auto made = [](const Plan& plan, const std::string& name) {
    return std::any_of(plan.create_pods.begin(), plan.create_pods.end(),
                       [&](const json& p) { return p["metadata"]["name"] == name; });
  };
  auto ended = observe(pods, admitted(kT0));
  ended.worker_workloads[2] = kueue::workload_state(finished());
  const auto plan = reconcile(job, testing::running_since(kT0), ended, kT0 + seconds(30));
  EXPECT_FALSE(made(plan, "j-worker-2"));
  EXPECT_EQ(plan.delete_workloads, std::vector<std::string>{"j-0123ab-2"});
  EXPECT_TRUE(plan.requeue_after);
  EXPECT_NE(plan.status.state, ConditionType::kQueued);  // the job itself trains on
  // Being deleted: asked already, still not made.
  ended.worker_workloads[2] = kueue::workload_state(workload(finished()["status"]["conditions"],
                                                             /*deleting=*/true));
  const auto deleting = reconcile(job, plan.status, ended, kT0 + seconds(31));
  EXPECT_FALSE(made(deleting, "j-worker-2"));
  EXPECT_TRUE(deleting.delete_workloads.empty());
  // Gone: made, in its own group.
  ended.worker_workloads.clear();
  const auto gone = reconcile(job, plan.status, ended, kT0 + seconds(36));
  EXPECT_TRUE(made(gone, "j-worker-2"));
  EXPECT_TRUE(gone.delete_workloads.empty());
}

}  // namespace
}  // namespace cifar::op::queue_test
