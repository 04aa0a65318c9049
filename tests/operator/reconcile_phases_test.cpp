// The phases of a reconcile (job_end.h, suspend.h, active_deadline.h, replicas.h, and the tally
// of replica_tally.h), each on its own: whether it ends the round, and what it adds to the plan.
// reconcile_test.cpp drives them together.
#include <gtest/gtest.h>

#include "cifartrainjob/active_deadline.h"
#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/job_end.h"
#include "cifartrainjob/replica_tally.h"
#include "cifartrainjob/replicas.h"
#include "cifartrainjob/suspend.h"
#include "tests/operator/fixtures.h"

namespace cifar::op::reconcile_phases_test {
namespace {

using nlohmann::json;
using std::chrono::seconds;

using testing::kT0;

Job make_job() {
  const auto spec = json::parse(R"({"image": "i", "model": {"name": "resnet20"},
    "dataset": {"name": "cifar10"}, "strategy": {"type": "ParameterServer"},
    "replicaSpecs": {"PS": {"replicas": 1}, "Master": {"replicas": 1},
                     "Worker": {"replicas": 2}},
    "runPolicy": {"restartPolicy": "ExitCode", "backoffLimit": 3}})");
  return Job{"j", "ns", "uid", parse_spec(spec), ""};
}

json pod(const Job& job, Role role, int index, const std::string& phase,
         std::optional<int> code = std::nullopt) {
  auto p = desired_pod(job, role, index);
  p["status"] = {{"phase", phase}};
  if (code) {
    p["status"]["containerStatuses"] = {{{"state", {{"terminated", {{"exitCode", *code}}}}}}};
  }
  return p;
}

PodsByName all_running(const Job& job) {
  PodsByName pods;
  for (const auto& p : desired_pods(job)) {
    auto running = p;
    running["status"] = {{"phase", "Running"}};
    pods[p["metadata"]["name"]] = running;
  }
  return pods;
}

Plan finished_plan(Clock::time_point at) {
  Plan plan;
  plan.status.set_state(ConditionType::kSucceeded, reason::kJobSucceeded, "done", to_time(at));
  plan.status.completion_time = to_time(at);
  return plan;
}

TEST(FinishedPhase, GoesOnForAJobThatHasNotFinished) {
  Plan plan;
  EXPECT_EQ(reconcile_finished(make_job().spec, all_running(make_job()), kT0, plan),
            PhaseResult::kContinue);
  EXPECT_TRUE(plan.delete_pods.empty());
}

TEST(FinishedPhase, CleansUpAndWaitsOutTheTtl) {
  auto job = make_job();
  job.spec.ttl_seconds_after_finished = 60;
  auto plan = finished_plan(kT0);
  EXPECT_EQ(reconcile_finished(job.spec, all_running(job), kT0 + seconds(20), plan),
            PhaseResult::kDone);
  EXPECT_EQ(plan.delete_pods.size(), 4U);  // cleanPodPolicy Running
  EXPECT_EQ(plan.requeue_after, seconds(41));
  EXPECT_FALSE(plan.delete_job);
  auto expired = finished_plan(kT0);
  reconcile_finished(job.spec, {}, kT0 + seconds(60), expired);
  EXPECT_TRUE(expired.delete_job);
}

TEST(SuspendedPhase, DeletesThePodsOnceAndEndsTheRound) {
  auto job = make_job();
  job.spec.suspend = true;
  auto pods = all_running(job);
  pods["j-ps-0"]["metadata"]["deletionTimestamp"] = "2026-11-22T12:00:00Z";
  Plan plan;
  plan.status.start_time = to_time(kT0);
  EXPECT_EQ(reconcile_suspended(job.spec, pods, kT0, plan), PhaseResult::kDone);
  EXPECT_EQ(plan.delete_pods.size(), 3U);  // not the one already terminating
  EXPECT_EQ(plan.status.state, ConditionType::kSuspended);
  EXPECT_FALSE(plan.status.start_time);
  ASSERT_EQ(plan.events.size(), 1U);
  Plan again;
  again.status = plan.status;
  reconcile_suspended(job.spec, pods, kT0 + seconds(5), again);
  EXPECT_TRUE(again.events.empty());  // announced once
}

TEST(SuspendedPhase, AResumedJobGoesOn) {
  auto job = make_job();
  Plan plan;
  plan.status.set_state(ConditionType::kSuspended, reason::kJobSuspended, "s", to_time(kT0));
  EXPECT_EQ(reconcile_suspended(job.spec, {}, kT0, plan), PhaseResult::kContinue);
  EXPECT_FALSE(plan.status.is_true(ConditionType::kSuspended));
  EXPECT_EQ(plan.status.condition(ConditionType::kSuspended)->reason, reason::kJobResumed);
  ASSERT_EQ(plan.events.size(), 1U);
  EXPECT_EQ(plan.events[0].reason, reason::kJobResumed);
}

TEST(DeadlinePhase, StartsTheClockAndRequeuesForTheDeadline) {
  auto job = make_job();
  Plan plan;
  EXPECT_EQ(reconcile_deadline(job, {}, kT0 + std::chrono::milliseconds(700), plan),
            PhaseResult::kContinue);
  EXPECT_EQ(plan.status.start_time, to_time(kT0));  // whole seconds
  EXPECT_FALSE(plan.requeue_after);                 // no deadline
  job.spec.active_deadline_seconds = 100;
  EXPECT_EQ(reconcile_deadline(job, {}, kT0 + seconds(30), plan), PhaseResult::kContinue);
  EXPECT_EQ(plan.status.start_time, to_time(kT0));  // kept
  EXPECT_EQ(plan.requeue_after, seconds(71));
}

TEST(DeadlinePhase, APassedDeadlineFailsTheJob) {
  auto job = make_job();
  job.spec.active_deadline_seconds = 100;
  Plan plan;
  plan.status.start_time = to_time(kT0);
  EXPECT_EQ(reconcile_deadline(job, all_running(job), kT0 + seconds(100), plan),
            PhaseResult::kDone);
  EXPECT_EQ(plan.status.state, ConditionType::kFailed);
  EXPECT_EQ(plan.status.condition(ConditionType::kFailed)->reason, reason::kDeadlineExceeded);
  EXPECT_EQ(plan.status.completion_time, to_time(kT0 + seconds(100)));
  EXPECT_EQ(plan.delete_pods.size(), 4U);
}

TEST(ReplicaTally, CountsEachRolesPodsAndWhatIsMissing) {
  const auto job = make_job();
  auto pods = all_running(job);
  pods.erase("j-worker-1");
  pods["j-worker-0"] = pod(job, Role::kWorker, 0, "Failed", 137);
  const auto tally = tally_replicas(job, pods);
  EXPECT_EQ(tally.statuses.at("PS").active, 1);
  EXPECT_EQ(tally.statuses.at("Worker").failed, 1);
  ASSERT_EQ(tally.missing.size(), 1U);
  EXPECT_EQ(tally.missing[0], std::make_pair(Role::kWorker, 1));
  ASSERT_EQ(tally.retryable.size(), 1U);
  EXPECT_EQ(tally.retryable[0].exit_code, 137);
  EXPECT_FALSE(tally.permanent);
  EXPECT_FALSE(tally.all_exist);
  EXPECT_TRUE(tally.any_running);
}

TEST(ReplicaTally, StopsAtAPermanentFailure) {
  const auto job = make_job();
  auto pods = all_running(job);
  pods["j-master-0"] = pod(job, Role::kMaster, 0, "Failed", 1);
  const auto tally = tally_replicas(job, pods);
  ASSERT_TRUE(tally.permanent);
  EXPECT_EQ(tally.permanent->name, "j-master-0");
  EXPECT_EQ(tally.statuses.count("PS"), 1U);  // the roles before it
  EXPECT_EQ(tally.statuses.count("Master"), 0U);
  EXPECT_EQ(tally.statuses.count("Worker"), 0U);
}

TEST(ReplicasPhase, CreatesTheJobsObjectsAndPods) {
  const auto job = make_job();
  Plan plan;
  reconcile_replicas(job, {}, Observed{}, kT0, plan);
  EXPECT_TRUE(plan.create_token_secret);
  EXPECT_TRUE(plan.create_service);
  EXPECT_EQ(plan.create_pods.size(), 4U);
  EXPECT_EQ(plan.status.state, ConditionType::kCreated);
  EXPECT_EQ(plan.status.restarts, 0);
  ASSERT_EQ(plan.events.size(), 1U);
  EXPECT_EQ(plan.events[0].reason, reason::kJobCreated);
}

TEST(ReplicasPhase, RecreatesARetryableFailureAndSaysWhy) {
  const auto job = make_job();
  auto pods = all_running(job);
  pods["j-worker-1"] = pod(job, Role::kWorker, 1, "Failed", 137);
  Plan plan;
  plan.status.restarts = 2;
  reconcile_replicas(job, pods, testing::no_pods(), kT0, plan);
  EXPECT_EQ(plan.delete_pods, std::vector<std::string>{"j-worker-1"});
  EXPECT_EQ(plan.status.restarts, 3);
  EXPECT_EQ(plan.status.state, ConditionType::kRestarting);
  EXPECT_EQ(plan.status.condition(ConditionType::kRestarting)->message,
            "pod j-worker-1 failed with exit code 137; recreating it (restart 3)");
}

TEST(ReplicasPhase, TheChiefsSuccessEndsTheJob) {
  const auto job = make_job();
  auto pods = all_running(job);
  pods["j-master-0"] = pod(job, Role::kMaster, 0, "Succeeded", 0);
  Plan plan;
  reconcile_replicas(job, pods, testing::no_pods(), kT0, plan);
  EXPECT_EQ(plan.status.state, ConditionType::kSucceeded);
  EXPECT_EQ(plan.status.completion_time, to_time(kT0));
}

}  // namespace
}  // namespace cifar::op::reconcile_phases_test
