// The reconcile function, round by round, on observed states built from the desired pods with
// the status a kubelet would report: creation, restart policy x exit code, backoff (recreated
// pods included), success and failure rules, deadline, TTL, suspend and resume, invalid specs.
#include "cifartrainjob/reconcile.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "cifartrainjob/desired_state.h"
#include "contract/exit_codes.h"
#include "tests/operator/fixtures.h"

namespace cifar::op::reconcile_test {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using testing::env_of;
using testing::kT0;
using testing::no_pods;
using testing::pod_named;

Job make_job(const std::string& restart_policy, int backoff_limit = 3, bool with_master = true) {
  json spec = json::parse(R"({"image": "i", "model": {"name": "resnet20"},
    "dataset": {"name": "cifar10"},
    "strategy": {"type": "ParameterServer"},
    "replicaSpecs": {"PS": {"replicas": 1}, "Worker": {"replicas": 2},
                     "Evaluator": {"replicas": 1}},
    "checkpoint": {"volume": {"claimName": "checkpoints"}}})");
  if (with_master) spec["replicaSpecs"]["Master"] = {{"replicas", 1}};
  spec["runPolicy"] = {{"restartPolicy", restart_policy}, {"backoffLimit", backoff_limit}};
  return Job{"j", "ns", "uid", parse_spec(spec), ""};
}

json with_phase(json pod, const std::string& phase, std::optional<int> code = std::nullopt,
                int restart_count = 0) {
  pod["status"] = {{"phase", phase}};
  json container = {{"name", "cifar-train"}, {"restartCount", restart_count}};
  if (code) container["state"] = {{"terminated", {{"exitCode", *code}}}};
  pod["status"]["containerStatuses"] = json::array({container});
  return pod;
}

// Every desired pod Running, the Service there.
Observed running(const Job& job) {
  auto o = testing::no_pods();
  for (const auto& p : desired_pods(job))
    o.pods.push_back(testing::created(with_phase(p, "Running")));
  return o;
}

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string reason_of(const json& status, const std::string& type) {
  for (const auto& c : status["conditions"]) {
    if (c["type"] == type && c["status"] == "True") return c["reason"];
  }
  return "";
}

TEST(Reconcile, ANewJobCreatesItsServiceAndEveryPodOnce) {
  const auto job = make_job("OnFailure");
  const auto plan = reconcile(job, JobStatus{}, Observed{}, kT0);
  ASSERT_TRUE(plan.create_service.has_value());
  EXPECT_TRUE(plan.create_token_secret);
  ASSERT_TRUE(plan.create_network_policy.has_value());
  EXPECT_EQ(plan.create_pods.size(), 5U);
  EXPECT_EQ(reason_of(plan.status, "Created"), "JobCreated");
  EXPECT_EQ(json(plan.status)["startTime"], "2026-11-22T12:00:00Z");
  // The next round sees them: nothing more to create, and all running means Running.
  const auto next = reconcile(job, plan.status, running(job), kT0 + seconds(5));
  EXPECT_FALSE(next.create_service.has_value());
  EXPECT_FALSE(next.create_token_secret);
  EXPECT_FALSE(next.create_network_policy.has_value());
  EXPECT_TRUE(next.create_pods.empty());
  EXPECT_TRUE(next.delete_pods.empty());
  EXPECT_EQ(json(next.status)["state"], "Running");
  EXPECT_EQ(json(next.status)["replicaStatuses"]["Worker"]["active"], 2);
  EXPECT_EQ(json(next.status)["startTime"], "2026-11-22T12:00:00Z");
}

TEST(Reconcile, AMissingPodIsRecreatedAlone) {
  const auto job = make_job("OnFailure");
  auto observed = running(job);
  observed.pods.erase(observed.pods.begin() + 2);  // worker 0
  const auto plan = reconcile(job, JobStatus{}, observed, kT0);
  ASSERT_EQ(plan.create_pods.size(), 1U);
  EXPECT_EQ(plan.create_pods[0]["metadata"]["name"], "j-worker-0");
}

// The pod's CIFAR_INCARNATION and its annotation, which must agree ("" if absent).
std::string incarnation_of(const json& pod) {
  const auto annotation =
      pod["metadata"].value("annotations", json::object()).value("cifartrain.io/incarnation", "");
  for (const auto& var : pod["spec"]["containers"][0]["env"]) {
    if (var["name"] == "CIFAR_INCARNATION") {
      EXPECT_EQ(var["value"], annotation);
      return var["value"];
    }
  }
  return "";
}

std::string chief_incarnation_of(const json& pod) { return env_of(pod, "CIFAR_CHIEF_INCARNATION"); }

// The fence's numbers: every round that creates pods gives them one more than any before, and the
// status records it, so a replacement outranks the pod it replaces.
TEST(Reconcile, EveryRoundThatCreatesPodsGivesThemAnIncarnationAboveAllBefore) {
  const auto job = make_job("OnFailure");
  const auto first = reconcile(job, JobStatus{}, Observed{}, kT0);
  EXPECT_EQ(first.status.incarnation, 1);
  for (const auto& pod : first.create_pods) {
    EXPECT_EQ(incarnation_of(pod), "1");
    EXPECT_EQ(chief_incarnation_of(pod), "1");  // created with the chief
    // Trainers learn the parameter servers' numbers; the PS and the evaluator need none.
    const bool trainer =
        pod["metadata"]["name"] == "j-master-0" ||
        pod["metadata"]["name"].get<std::string>().find("-worker-") != std::string::npos;
    EXPECT_EQ(env_of(pod, "CIFAR_PS_INCARNATIONS"), trainer ? "1" : "") << pod["metadata"]["name"];
  }

  auto observed = running(job);
  const auto unchanged = reconcile(job, first.status, observed, kT0 + seconds(5));
  EXPECT_EQ(unchanged.status.incarnation, 1);  // nothing created, nothing handed out

  observed.pods.erase(observed.pods.begin() + 1);  // the master, gone with its node
  const auto replaced = reconcile(job, unchanged.status, observed, kT0 + seconds(10));
  ASSERT_EQ(replaced.create_pods.size(), 1U);
  EXPECT_EQ(replaced.create_pods[0]["metadata"]["name"], "j-master-0");
  EXPECT_EQ(incarnation_of(replaced.create_pods[0]), "2");
  EXPECT_EQ(chief_incarnation_of(replaced.create_pods[0]), "2");
  EXPECT_EQ(replaced.status.incarnation, 2);
  EXPECT_EQ(json(replaced.status)["incarnation"], 2);

  // A pod shows a number the status lost (its round's status write was refused as stale): the
  // next round goes above it too.
  auto shown = running(job);
  stamp_incarnation(pod_named(shown, "j-ps-0"), 7);
  shown.pods.erase(shown.pods.begin() + 2);  // worker 0
  const auto above = reconcile(job, replaced.status, shown, kT0 + seconds(20));
  ASSERT_EQ(above.create_pods.size(), 1U);
  EXPECT_EQ(incarnation_of(above.create_pods[0]), "8");
  EXPECT_EQ(above.status.incarnation, 8);
  // A worker created alone learns the running chief's number, not its own.
  stamp_incarnation(pod_named(shown, "j-master-0"), 2);
  const auto beside = reconcile(job, replaced.status, shown, kT0 + seconds(20));
  ASSERT_EQ(beside.create_pods.size(), 1U);
  EXPECT_EQ(chief_incarnation_of(beside.create_pods[0]), "2");
  // ... and the running PS's, so that it never trains against an older one.
  EXPECT_EQ(env_of(beside.create_pods[0], "CIFAR_PS_INCARNATIONS"), "7");
  // A PS and a worker created together: the worker expects the new PS.
  auto both_gone = running(job);
  both_gone.pods.erase(both_gone.pods.begin() + 2);  // worker 0
  both_gone.pods.erase(both_gone.pods.begin());      // the PS
  const auto together = reconcile(job, replaced.status, both_gone, kT0 + seconds(30));
  ASSERT_EQ(together.create_pods.size(), 2U);
  EXPECT_EQ(env_of(together.create_pods[1], "CIFAR_PS_INCARNATIONS"), "3");
}

// The restart-policy x exit-code matrix: {policy, exit code, retried?}.
struct FailureCase {
  std::string policy;
  std::optional<int> code;
  bool retried;
};

TEST(Reconcile, RestartPolicyByExitCode) {
  const std::vector<FailureCase> cases = {
      {"Never", 1, false},
      {"Never", 137, false},
      {"Never", std::nullopt, false},
      {"OnFailure", 1, true},
      {"OnFailure", 137, true},
      {"ExitCode", 1, false},
      {"ExitCode", 127, false},
      {"ExitCode", 128, true},
      {"ExitCode", 137, true},
      {"ExitCode", std::nullopt, true},  // evicted: no exit code, retryable
  };
  for (const auto& c : cases) {
    const auto job = make_job(c.policy);
    auto observed = running(job);
    pod_named(observed, "j-worker-1") =
        with_phase(pod_named(observed, "j-worker-1"), "Failed", c.code);
    const auto plan = reconcile(job, JobStatus{}, observed, kT0);
    const auto what = c.policy + " exit " + (c.code ? std::to_string(*c.code) : "none");
    if (c.retried) {
      EXPECT_TRUE(has(plan.delete_pods, "j-worker-1")) << what;
      EXPECT_EQ(json(plan.status)["restarts"], 1) << what;
      EXPECT_EQ(json(plan.status)["state"], "Restarting") << what;
    } else {
      EXPECT_EQ(reason_of(plan.status, "Failed"), "PodFailed") << what;
      EXPECT_NE(
          json(plan.status)["conditions"].back()["message"].get<std::string>().find("j-worker-1"),
          std::string::npos)
          << what;
      EXPECT_TRUE(json(plan.status).contains("completionTime")) << what;
    }
  }
}

// A pod that exited kExitStopped was interrupted and saved the job's state first: whatever the
// policy, it is replaced and not counted against backoffLimit.
TEST(Reconcile, APodStoppedOnRequestIsReplacedAndNotCharged) {
  for (const auto* policy : {"Never", "OnFailure", "ExitCode"}) {
    const auto job = make_job(policy, /*backoff_limit=*/0);
    auto observed = running(job);
    pod_named(observed, "j-master-0") =
        with_phase(pod_named(observed, "j-master-0"), "Failed", contract::kExitStopped);
    const auto plan = reconcile(job, JobStatus{}, observed, kT0);
    EXPECT_TRUE(has(plan.delete_pods, "j-master-0")) << policy;
    EXPECT_EQ(plan.restarts, 0) << policy;
    EXPECT_EQ(reason_of(plan.status, "Failed"), "") << policy;
    EXPECT_EQ(json(plan.status)["state"], "Restarting") << policy;
    ASSERT_FALSE(plan.events.empty()) << policy;
    EXPECT_EQ(plan.events.back().reason, "PodStopped") << policy;
  }
}

// A pod deleted on purpose and killed when its grace period ran out (a 1 s grace in its template,
// a step longer than that) did not save: a Warning Event says so, for the roles the save needs.
TEST(Reconcile, APodKilledWhenItsGracePeriodRanOutBeforeItSavedIsReported) {
  const auto job = make_job("Never");
  const auto deleted = [&](const std::string& name, int code, const std::string& why = "Error") {
    auto observed = running(job);
    auto pod = with_phase(pod_named(observed, name), "Running");
    pod["metadata"]["deletionTimestamp"] = "2026-11-22T12:00:01Z";
    pod["spec"]["terminationGracePeriodSeconds"] = 1;
    pod["status"]["containerStatuses"][0]["state"] = {
        {"terminated", {{"exitCode", code}, {"reason", why}}}};
    return pod;
  };
  const auto events_for = [&](const json& pod, const JobStatus& status = JobStatus{}) {
    auto observed = running(job);
    observed.deleted_pods.push_back(pod);
    std::vector<std::string> said;
    for (const auto& e : reconcile(job, status, observed, kT0).events) {
      if (e.reason == "StopNotSaved") said.push_back(e.type + ": " + e.message);
    }
    return said;
  };
  for (const auto* name : {"j-master-0", "j-ps-0"}) {
    const auto said = events_for(deleted(name, 137));
    ASSERT_EQ(said.size(), 1U) << name;
    EXPECT_EQ(said[0].rfind("Warning: pod " + std::string(name) +
                                " was killed when its grace period of 1 s ran out",
                            0),
              0U)
        << said[0];
    EXPECT_NE(said[0].find("goes on from its last checkpoint"), std::string::npos) << said[0];
  }
  // A worker of a PS job holds no state; the evaluator saves nothing.
  EXPECT_TRUE(events_for(deleted("j-worker-1", 137)).empty());
  EXPECT_TRUE(events_for(deleted("j-evaluator-0", 137)).empty());
  // Saved in time (3), ended by itself (0, 1), or killed for its memory: not this.
  EXPECT_TRUE(events_for(deleted("j-master-0", contract::kExitStopped)).empty());
  EXPECT_TRUE(events_for(deleted("j-master-0", 1)).empty());
  EXPECT_TRUE(events_for(deleted("j-master-0", 137, "OOMKilled")).empty());
  // A pod killed without a deletion (the kubelet's own kill) is a restart, not a stop.
  auto not_deleted = deleted("j-master-0", 137);
  not_deleted["metadata"].erase("deletionTimestamp");
  EXPECT_TRUE(events_for(not_deleted).empty());
  // A finished job's pods are cleaned up: nothing of the run is at stake.
  JobStatus succeeded;
  succeeded.set_state(ConditionType::kSucceeded, "JobSucceeded", "", to_time(kT0));
  EXPECT_TRUE(events_for(deleted("j-master-0", 137), succeeded).empty());
}

// In an all-reduce job the chief (rank 0) writes the checkpoint: its end is the one reported.
TEST(Reconcile, AnAllReduceChiefKilledWhenItsGracePeriodRanOutIsReported) {
  const auto job = Job{"j", "ns", "uid", parse_spec(json::parse(R"({"image": "i",
    "model": {"name": "resnet20"}, "dataset": {"name": "cifar10"},
    "strategy": {"type": "AllReduce"}, "replicaSpecs": {"Worker": {"replicas": 2}},
    "checkpoint": {"volume": {"claimName": "checkpoints"}}})")),
                       ""};
  auto observed = running(job);
  auto chief = pod_named(observed, "j-worker-0");
  chief["metadata"]["deletionTimestamp"] = "2026-11-22T12:00:01Z";
  chief["status"]["containerStatuses"][0]["state"] = {{"terminated", {{"exitCode", 137}}}};
  observed.deleted_pods.push_back(chief);
  const auto plan = reconcile(job, JobStatus{}, observed, kT0);
  ASSERT_FALSE(plan.events.empty());
  EXPECT_EQ(plan.events.front().reason, "StopNotSaved");
  EXPECT_NE(plan.events.front().message.find("grace period of 30 s"), std::string::npos)
      << plan.events.front().message;
}

TEST(Reconcile, AFailedPsIsNotIgnored) {
  auto job = make_job("ExitCode");
  auto observed = running(job);
  pod_named(observed, "j-ps-0") = with_phase(pod_named(observed, "j-ps-0"), "Failed", 2);
  EXPECT_EQ(reason_of(reconcile(job, JobStatus{}, observed, kT0).status, "Failed"), "PodFailed");
  pod_named(observed, "j-ps-0") = with_phase(pod_named(observed, "j-ps-0"), "Failed", 137);
  EXPECT_TRUE(has(reconcile(job, JobStatus{}, observed, kT0).delete_pods, "j-ps-0"));
}

TEST(Reconcile, BackoffCountsRecreatedPodsUntilTheLimit) {
  // Kubeflow's bug: ExitCode restarts recreate the pod, so a per-pod restartCount never grows.
  const auto job = make_job("ExitCode", /*backoff_limit=*/2);
  JobStatus status;
  for (int round = 1; round <= 3; ++round) {
    auto observed = running(job);
    pod_named(observed, "j-worker-0") =
        with_phase(pod_named(observed, "j-worker-0"), "Failed", 137);
    const auto plan = reconcile(job, status, observed, kT0 + seconds(round));
    status = plan.status;
    EXPECT_EQ(plan.restarts, round);
    if (round <= 2) {
      EXPECT_EQ(json(status)["restarts"], round);
      EXPECT_TRUE(has(plan.delete_pods, "j-worker-0"));
    } else {
      EXPECT_EQ(reason_of(status, "Failed"), "BackoffLimitExceeded");
      EXPECT_NE(json(status)["conditions"].back()["message"].get<std::string>().find("3 times"),
                std::string::npos);
    }
  }
}

TEST(Reconcile, InPlaceRestartsCountTowardsTheLimit) {
  const auto job = make_job("OnFailure", 3);
  auto observed = running(job);
  pod_named(observed, "j-worker-0") =
      with_phase(pod_named(observed, "j-worker-0"), "Running", {}, 2);
  EXPECT_EQ(json(reconcile(job, JobStatus{}, observed, kT0).status)["state"], "Running");
  pod_named(observed, "j-ps-0") = with_phase(pod_named(observed, "j-ps-0"), "Running", {}, 2);
  // The message says why: the container that ended last, its code and its termination log.
  const auto ended = [](json pod, const std::string& at, const std::string& error) {
    pod["status"]["containerStatuses"][0]["lastState"] = {
        {"terminated",
         {{"exitCode", 1}, {"finishedAt", at}, {"message", json{{"error", error}}.dump()}}}};
    return pod;
  };
  pod_named(observed, "j-worker-0") =
      ended(pod_named(observed, "j-worker-0"), "2026-01-01T00:00:09Z", "PS shard 0 unreachable");
  pod_named(observed, "j-ps-0") =
      ended(pod_named(observed, "j-ps-0"), "2026-01-01T00:00:05Z", "out of disk");
  const auto failed = json(reconcile(job, JobStatus{}, observed, kT0).status);
  EXPECT_EQ(reason_of(failed, "Failed"), "BackoffLimitExceeded");
  EXPECT_EQ(failed["message"],
            "restarted 4 times, more than backoffLimit 3; the last, pod j-worker-0, failed with "
            "exit code 1: PS shard 0 unreachable");
}

TEST(Reconcile, PlanRestartsIsTheCountTheBackoffLimitSeesAndTheStatusSays) {
  const auto job = make_job("OnFailure", 3);
  JobStatus status;
  status.pod_restarts = {{"uid-of-a-pod-recreated-before", 1}};
  auto observed = running(job);
  EXPECT_EQ(reconcile(job, status, observed, kT0).restarts, 1);
  pod_named(observed, "j-worker-0") =
      with_phase(pod_named(observed, "j-worker-0"), "Running", {}, 2);
  const auto running_plan = reconcile(job, status, observed, kT0);
  EXPECT_EQ(running_plan.restarts, 3);
  EXPECT_EQ(json(running_plan.status)["restarts"], 3);
  EXPECT_EQ(json(running_plan.status)["state"], "Running");
  pod_named(observed, "j-ps-0") = with_phase(pod_named(observed, "j-ps-0"), "Running", {}, 1);
  const auto failed = reconcile(job, running_plan.status, observed, kT0);
  EXPECT_EQ(failed.restarts, 4);
  EXPECT_EQ(json(failed.status)["restarts"], 4);
  EXPECT_EQ(reason_of(failed.status, "Failed"), "BackoffLimitExceeded");
  EXPECT_NE(json(failed.status)["message"].get<std::string>().find("restarted 4 times"),
            std::string::npos);
  // The rounds after it: the same count, with the pods there and once they are gone.
  EXPECT_EQ(reconcile(job, failed.status, observed, kT0 + seconds(1)).restarts, 4);
  EXPECT_EQ(reconcile(job, failed.status, Observed{}, kT0 + seconds(2)).restarts, 4);
  // A job that cannot run: its status's count.
  EXPECT_EQ(reconcile_failed(failed.status, "InvalidSpec", "x", kT0).restarts, 4);
  EXPECT_EQ(reconcile_failed(JobStatus{}, "InvalidSpec", "x", kT0).restarts, 0);
}

// kubeflow: a rank-1 pod restarted in place and then recreated took its in-place restarts with
// it, so status.restarts (0) disagreed with the message that failed the job (4).
TEST(Reconcile, APodsRestartsStillCountOnceTheOperatorHasRecreatedIt) {
  const auto job = make_job("OnFailure", 3);
  auto observed = running(job);
  // Restarted in place twice, then failed for good (evicted): recreated, a third restart.
  pod_named(observed, "j-worker-1") = with_phase(pod_named(observed, "j-worker-1"), "Failed", 1, 2);
  const auto recreated = reconcile(job, JobStatus{}, observed, kT0);
  ASSERT_TRUE(has(recreated.delete_pods, "j-worker-1"));
  EXPECT_EQ(recreated.restarts, 3);
  EXPECT_EQ(json(recreated.status)["restarts"], 3);
  // The same pod seen failed again before its deletion shows: charged once.
  EXPECT_EQ(reconcile(job, recreated.status, observed, kT0 + seconds(1)).restarts, 3);
  // Its replacement, a new pod under the name, restarts once more: past the limit.
  auto after = running(job);
  pod_named(after, "j-worker-1") = with_phase(pod_named(after, "j-worker-1"), "Running", {}, 1);
  const auto failed = reconcile(job, recreated.status, after, kT0 + seconds(2));
  EXPECT_EQ(reason_of(failed.status, "Failed"), "BackoffLimitExceeded");
  EXPECT_EQ(json(failed.status)["restarts"], 4);
  EXPECT_NE(json(failed.status)["message"].get<std::string>().find("restarted 4 times"),
            std::string::npos)
      << json(failed.status)["message"];
}

// An operator upgraded under a job whose status counted recreations only (no podRestarts).
TEST(Reconcile, AStatusFromBeforePodRestartsKeepsItsCount) {
  const auto job = make_job("OnFailure", 3);
  JobStatus status;
  status.restarts = 2;
  auto observed = running(job);
  pod_named(observed, "j-worker-0") =
      with_phase(pod_named(observed, "j-worker-0"), "Running", {}, 1);
  const auto plan = reconcile(job, status, observed, kT0);
  EXPECT_EQ(plan.restarts, 3);
  EXPECT_EQ(json(plan.status)["podRestarts"]["earlier"], 2);
}

TEST(Reconcile, TheMasterDecidesSuccessAndRunningPodsAreCleanedUp) {
  const auto job = make_job("OnFailure");
  auto observed = running(job);
  pod_named(observed, "j-worker-0") = with_phase(pod_named(observed, "j-worker-0"), "Succeeded", 0);
  pod_named(observed, "j-evaluator-0") =
      with_phase(pod_named(observed, "j-evaluator-0"), "Succeeded", 0);
  EXPECT_EQ(json(reconcile(job, JobStatus{}, observed, kT0).status)["state"],
            "Running");  // not the chief
  pod_named(observed, "j-master-0") = with_phase(pod_named(observed, "j-master-0"), "Succeeded", 0);
  const auto plan = reconcile(job, JobStatus{}, observed, kT0);
  EXPECT_EQ(reason_of(plan.status, "Succeeded"), "JobSucceeded");
  // cleanPodPolicy Running (the default): the PS and the other worker, not the finished ones.
  auto deleted = plan.delete_pods;
  std::sort(deleted.begin(), deleted.end());
  EXPECT_EQ(deleted, (std::vector<std::string>{"j-ps-0", "j-worker-1"}));
}

// What PS 0 says of the trainers (status.progress.trainers, progress.h), at the job's `step`.
json progress_with(int64_t step, const json& missing, int expected = 3) {
  return {{"step", step},
          {"trainers",
           {{"expected", expected},
            {"training", expected - static_cast<int>(missing.size())},
            {"missing", missing}}}};
}

std::string message_of(const json& status, const std::string& type) {
  for (const auto& c : status["conditions"]) {
    if (c["type"] == type) return c["message"];
  }
  return "";
}

TEST(Reconcile, ATrainerDroppedMidRunIsReportedOnceAndTheJobsEndSaysItTrainedWithFewer) {
  const auto job = make_job("OnFailure");
  auto observed = running(job);
  observed.progress = progress_with(40, json::array());
  auto plan = reconcile(job, testing::running_since(kT0), observed, kT0);
  EXPECT_EQ(message_of(json(plan.status), "TrainersMissing"), "");  // all train: nothing said
  EXPECT_TRUE(plan.events.empty());

  observed.progress = progress_with(120, {{{"trainer", 2}, {"droppedAtStep", 117}}});
  plan = reconcile(job, plan.status, observed, kT0 + seconds(10));
  EXPECT_EQ(reason_of(plan.status, "TrainersMissing"), "TrainerDropped");
  const std::string said = "j-worker-1 dropped at step 117; training on with 2 of 3 trainers";
  EXPECT_EQ(message_of(plan.status, "TrainersMissing"), said);
  ASSERT_EQ(plan.events.size(), 1U);
  EXPECT_EQ(plan.events[0].type, "Warning");
  EXPECT_EQ(plan.events[0].message, said);
  EXPECT_EQ(json(plan.status)["state"], "Running");          // the job goes on
  EXPECT_EQ(json(plan.status)["reason"], "TrainerDropped");  // kubectl get ctj's REASON

  observed.progress = progress_with(130, {{{"trainer", 2}, {"droppedAtStep", 117}}});
  plan = reconcile(job, plan.status, observed, kT0 + seconds(20));
  EXPECT_TRUE(plan.events.empty());  // not news

  for (const auto* name : {"j-worker-0", "j-worker-1", "j-evaluator-0", "j-master-0"}) {
    pod_named(observed, name) = with_phase(pod_named(observed, name), "Succeeded", 0);
  }
  observed.progress.reset();
  plan = reconcile(job, plan.status, observed, kT0 + seconds(30));
  EXPECT_EQ(reason_of(plan.status, "Succeeded"), "JobSucceeded");
  EXPECT_EQ(json(plan.status)["message"],
            "the chief j-master-0 succeeded; it ended with 2 of 3 trainers: j-worker-1 dropped at "
            "step 117");
  ASSERT_FALSE(plan.events.empty());
  EXPECT_EQ(plan.events.back().message, json(plan.status)["message"]);
}

TEST(Reconcile, AnAsyncJobThatStartedWithoutATrainerSaysSoUntilItJoins) {
  const auto job = make_job("OnFailure");
  auto observed = running(job);
  // Nothing before the first step: a synchronous job waits there for every trainer.
  observed.progress = progress_with(0, {{{"trainer", 1}}});
  auto plan = reconcile(job, testing::running_since(kT0), observed, kT0);
  EXPECT_EQ(reason_of(plan.status, "TrainersMissing"), "");
  EXPECT_TRUE(plan.events.empty());

  observed.progress = progress_with(8, {{{"trainer", 1}}});
  plan = reconcile(job, plan.status, observed, kT0 + seconds(5));
  EXPECT_EQ(reason_of(plan.status, "TrainersMissing"), "TrainerNotJoined");
  EXPECT_EQ(message_of(plan.status, "TrainersMissing"),
            "j-worker-0 has not joined; training on with 2 of 3 trainers");
  ASSERT_EQ(plan.events.size(), 1U);

  // A reading without the PS's word changes nothing; the PS's word that all train clears it.
  observed.progress = json{{"step", 9}};
  plan = reconcile(job, plan.status, observed, kT0 + seconds(6));
  EXPECT_EQ(reason_of(plan.status, "TrainersMissing"), "TrainerNotJoined");
  EXPECT_TRUE(plan.events.empty());
  observed.progress = progress_with(20, json::array());
  plan = reconcile(job, plan.status, observed, kT0 + seconds(10));
  EXPECT_EQ(reason_of(plan.status, "TrainersMissing"), "");
  EXPECT_EQ(message_of(plan.status, "TrainersMissing"), "every trainer trains again (3 of 3)");
  ASSERT_EQ(plan.events.size(), 1U);
  EXPECT_EQ(plan.events[0].type, "Normal");
  EXPECT_EQ(plan.events[0].reason, "AllTrainersTraining");
}

// The chief's store stopped answering: the job trains on, and says so once an outage.
TEST(Reconcile, AStoreThatDoesNotAnswerIsSaidWhileTheJobTrainsOnAndClearedWhenItAnswers) {
  auto job = make_job("OnFailure");
  job.spec.max_unsaved_seconds = 900;
  auto observed = running(job);
  observed.progress = json{{"step", 40}, {"checkpoint", {{"savedStep", 40}}}};
  auto plan = reconcile(job, testing::running_since(kT0), observed, kT0);
  EXPECT_EQ(message_of(json(plan.status), "CheckpointStoreUnreachable"), "");
  EXPECT_TRUE(plan.events.empty());

  observed.progress =
      json{{"step", 60},
           {"checkpoint", {{"savedStep", 40}, {"storeUnreachableSince", "2026-11-28T10:00:00Z"}}}};
  plan = reconcile(job, plan.status, observed, kT0 + seconds(10));
  const std::string said =
      "the checkpoint store has not answered since 2026-11-28T10:00:00Z; training goes on and the "
      "newest checkpoint waits to be saved (the job fails if the store stays away longer than "
      "checkpoint.maxUnsavedSeconds, 900 s)";
  EXPECT_EQ(reason_of(plan.status, "CheckpointStoreUnreachable"), "StoreNotAnswering");
  EXPECT_EQ(message_of(plan.status, "CheckpointStoreUnreachable"), said);
  ASSERT_EQ(plan.events.size(), 1U);
  EXPECT_EQ(plan.events[0].type, "Warning");
  EXPECT_EQ(plan.events[0].message, said);
  EXPECT_EQ(json(plan.status)["state"], "Running");  // the job goes on
  EXPECT_EQ(json(plan.status)["reason"], "StoreNotAnswering");

  (*observed.progress)["step"] = 80;  // still away: not news
  plan = reconcile(job, plan.status, observed, kT0 + seconds(20));
  EXPECT_TRUE(plan.events.empty());

  observed.progress = json{{"step", 90}, {"checkpoint", {{"savedStep", 90}}}};
  plan = reconcile(job, plan.status, observed, kT0 + seconds(30));
  EXPECT_EQ(reason_of(plan.status, "CheckpointStoreUnreachable"), "");  // False now
  EXPECT_EQ(message_of(plan.status, "CheckpointStoreUnreachable"),
            "the checkpoint store answers again; the newest checkpoint saved: step 90");
  ASSERT_EQ(plan.events.size(), 1U);
  EXPECT_EQ(plan.events[0].type, "Normal");
  EXPECT_EQ(plan.events[0].reason, "StoreAnswers");
  EXPECT_FALSE(json(plan.status).contains("reason"));
}

TEST(Reconcile, WithoutAMasterWorkerZeroDecides) {
  const auto job = make_job("OnFailure", 3, /*with_master=*/false);
  auto observed = running(job);
  pod_named(observed, "j-worker-1") = with_phase(pod_named(observed, "j-worker-1"), "Succeeded", 0);
  EXPECT_EQ(json(reconcile(job, JobStatus{}, observed, kT0).status)["state"], "Running");
  pod_named(observed, "j-worker-0") = with_phase(pod_named(observed, "j-worker-0"), "Succeeded", 0);
  EXPECT_EQ(json(reconcile(job, JobStatus{}, observed, kT0).status)["state"], "Succeeded");
}

TEST(Reconcile, TheDeadlineRequeuesThenFails) {
  auto job = make_job("OnFailure");
  job.spec.active_deadline_seconds = 600;
  const auto first = reconcile(job, JobStatus{}, Observed{}, kT0);
  ASSERT_TRUE(first.requeue_after.has_value());
  EXPECT_EQ(*first.requeue_after, seconds(601));
  const auto before = reconcile(job, first.status, running(job), kT0 + seconds(599));
  EXPECT_EQ(json(before.status)["state"], "Running");
  const auto after = reconcile(job, first.status, running(job), kT0 + seconds(600));
  EXPECT_EQ(reason_of(after.status, "Failed"), "DeadlineExceeded");
  EXPECT_EQ(after.delete_pods.size(), 5U);  // all still running
}

TEST(Reconcile, FinishedJobsAreDeletedAfterTheirTtl) {
  auto job = make_job("OnFailure");
  job.spec.ttl_seconds_after_finished = 60;
  auto observed = running(job);
  pod_named(observed, "j-master-0") = with_phase(pod_named(observed, "j-master-0"), "Succeeded", 0);
  const auto done = reconcile(job, JobStatus{}, observed, kT0);
  EXPECT_EQ(json(done.status)["state"], "Succeeded");
  EXPECT_EQ(done.requeue_after, seconds(60));
  const auto early = reconcile(job, done.status, Observed{}, kT0 + seconds(30));
  EXPECT_FALSE(early.delete_job);
  EXPECT_TRUE(early.create_pods.empty());  // a finished job never recreates pods
  EXPECT_EQ(early.requeue_after, seconds(31));
  EXPECT_TRUE(reconcile(job, done.status, Observed{}, kT0 + seconds(60)).delete_job);
}

TEST(Reconcile, CleanPodPolicyAllAndNone) {
  for (const auto& [policy, count] : std::vector<std::pair<CleanPodPolicy, size_t>>{
           {CleanPodPolicy::kAll, 5}, {CleanPodPolicy::kNone, 0}}) {
    auto job = make_job("OnFailure");
    job.spec.clean_pod_policy = policy;
    auto observed = running(job);
    pod_named(observed, "j-master-0") =
        with_phase(pod_named(observed, "j-master-0"), "Succeeded", 0);
    EXPECT_EQ(reconcile(job, JobStatus{}, observed, kT0).delete_pods.size(), count)
        << name_of(kCleanPodPolicyNames, policy);
  }
}

TEST(Reconcile, SuspendDeletesThePodsAndResumeCreatesThemAnew) {
  auto job = make_job("OnFailure");
  const auto started = reconcile(job, JobStatus{}, running(job), kT0);
  job.spec.suspend = true;
  const auto suspended = reconcile(job, started.status, running(job), kT0 + seconds(10));
  EXPECT_EQ(suspended.delete_pods.size(), 5U);
  EXPECT_EQ(json(suspended.status)["state"], "Suspended");
  EXPECT_FALSE(json(suspended.status).contains("startTime"));
  const auto still = reconcile(job, suspended.status, no_pods(), kT0 + seconds(20));
  EXPECT_TRUE(still.create_pods.empty());
  job.spec.suspend = false;
  const auto resumed = reconcile(job, suspended.status, no_pods(), kT0 + seconds(30));
  EXPECT_EQ(resumed.create_pods.size(), 5U);
  EXPECT_EQ(json(resumed.status)["startTime"], "2026-11-22T12:00:30Z");
  EXPECT_EQ(reason_of(resumed.status, "Suspended"), "");  // no longer suspended
}

TEST(Reconcile, AnInvalidSpecFailsTheJobAndCreatesNothing) {
  const auto plan = reconcile_failed(JobStatus{}, "InvalidSpec",
                                     InvalidSpec("replicaSpecs.PS", "needs a PS").what(), kT0);
  EXPECT_EQ(reason_of(plan.status, "Failed"), "InvalidSpec");
  EXPECT_EQ(json(plan.status)["conditions"].back()["message"], "spec.replicaSpecs.PS: needs a PS");
  EXPECT_FALSE(plan.create_service.has_value());
  EXPECT_FALSE(plan.create_token_secret);
  EXPECT_TRUE(plan.create_pods.empty());
  ASSERT_EQ(plan.events.size(), 1U);
  EXPECT_EQ(plan.events[0].type, "Warning");
  // Once failed, no new event every round, whatever fails next.
  EXPECT_TRUE(reconcile_failed(plan.status, "CreateRejected", "y", kT0).events.empty());
  EXPECT_EQ(reason_of(plan.status, "Failed"), "InvalidSpec");
}

}  // namespace
}  // namespace cifar::op::reconcile_test
