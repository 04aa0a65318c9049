// How a job that goes wrong says why (cifartrainjob/reconcile.h): pods held back by the scheduler
// or the kubelet, startup and terminating deadlines, creates refused for now, the round that ends a
// job, the evaluator's final evaluation and the final progress. Pure, with a fixed clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/progress.h"
#include "cifartrainjob/reconcile.h"
#include "contract/env.h"
#include "tests/operator/fixtures.h"

namespace cifar::op::lifecycle_test {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using testing::env_of;
using testing::kT0;
using testing::no_pods;
using testing::pod_named;

Job make_job(int startup_deadline = 600, int terminating_deadline = 300) {
  json spec = json::parse(R"({"image": "i", "model": {"name": "resnet20"},
    "dataset": {"name": "cifar10"}, "strategy": {"type": "ParameterServer"},
    "replicaSpecs": {"PS": {"replicas": 1}, "Master": {"replicas": 1},
                     "Worker": {"replicas": 1}, "Evaluator": {"replicas": 1}},
    "checkpoint": {"volume": {"claimName": "checkpoints"}}})");
  spec["runPolicy"] = {{"startupDeadlineSeconds", startup_deadline},
                       {"terminatingDeadlineSeconds", terminating_deadline}};
  return Job{"j", "ns", "uid", parse_spec(spec), ""};
}

// Every pod created at kT0 and running.
Observed running(const Job& job) {
  auto o = testing::no_pods();
  for (const auto& p : desired_pods(job)) o.pods.push_back(testing::running_pod(p, kT0));
  return o;
}

void unschedulable(json& pod) {
  pod["status"] = {{"phase", "Pending"},
                   {"conditions",
                    {{{"type", "PodScheduled"},
                      {"status", "False"},
                      {"reason", "Unschedulable"},
                      {"message", "0/1 nodes are available: 1 Insufficient cpu."}}}}};
}

void waiting(json& pod, const std::string& reason, const std::string& message) {
  pod["status"] = {{"phase", "Pending"},
                   {"containerStatuses",
                    {{{"name", "cifar-train"},
                      {"state", {{"waiting", {{"reason", reason}, {"message", message}}}}}}}}};
}

void terminated(json& pod, const std::string& phase, int code, const std::string& message,
                Clock::time_point at) {
  pod["status"] = {
      {"phase", phase},
      {"containerStatuses",
       {{{"name", "cifar-train"},
         {"state",
          {{"terminated",
            {{"exitCode", code}, {"message", message}, {"finishedAt", format_time(at)}}}}}}}}};
}

const JobCondition* condition(const Plan& plan, ConditionType type) {
  return plan.status.condition(type);
}

TEST(Lifecycle, AnUnschedulablePodIsReportedOnceThenFailsTheJobAtItsStartupDeadline) {
  const auto job = make_job(/*startup_deadline=*/120);
  auto observed = running(job);
  unschedulable(pod_named(observed, "j-worker-0"));
  const auto first = reconcile(job, JobStatus{}, observed, kT0 + seconds(5));
  const auto* held = condition(first, ConditionType::kPodsNotReady);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->status, ConditionStatus::kTrue);
  EXPECT_EQ(held->reason, "Unschedulable");
  EXPECT_EQ(held->message,
            "pod j-worker-0 is waiting: Unschedulable: 0/1 nodes are available: 1 Insufficient "
            "cpu.");
  EXPECT_EQ(first.status.summary_reason, "Unschedulable");  // kubectl get ctj's REASON
  EXPECT_EQ(json(first.status)["message"], held->message);
  ASSERT_EQ(first.events.size(), 1U);
  EXPECT_EQ(first.events[0].type, "Warning");
  EXPECT_EQ(first.events[0].reason, "Unschedulable");
  // The state stays what the pods say (Running: every pod exists and one runs); the reason is
  // beside it.
  EXPECT_EQ(json(first.status)["state"], "Running");
  // Looks again before the deadline (and to refresh what the pod waits for).
  ASSERT_TRUE(first.requeue_after.has_value());
  EXPECT_LE(*first.requeue_after, seconds(116));

  const auto second = reconcile(job, first.status, observed, kT0 + seconds(60));
  EXPECT_TRUE(second.events.empty());  // no news: no second Event
  EXPECT_TRUE(second.create_pods.empty());

  const auto late = reconcile(job, second.status, observed, kT0 + seconds(120));
  EXPECT_EQ(json(late.status)["state"], "Failed");
  EXPECT_EQ(late.status.summary_reason, "StartupDeadlineExceeded");
  const auto message = late.status.summary_message.value_or("");
  EXPECT_NE(message.find("pod j-worker-0 did not start within 120 s"), std::string::npos)
      << message;
  EXPECT_NE(message.find("Insufficient cpu"), std::string::npos) << message;
  EXPECT_EQ(condition(late, ConditionType::kPodsNotReady)->status, ConditionStatus::kFalse);
  // cleanPodPolicy Running: every pod still pending or running goes.
  EXPECT_EQ(late.delete_pods.size(), 4U);
}

TEST(Lifecycle, AnImagePullFailureIsReportedAndClearedWhenThePodRuns) {
  const auto job = make_job();
  auto observed = running(job);
  waiting(pod_named(observed, "j-ps-0"), "ImagePullBackOff",
          "Back-off pulling image \"registry.example/cifar:v9\"");
  const auto held = reconcile(job, JobStatus{}, observed, kT0 + seconds(30));
  EXPECT_EQ(held.status.summary_reason, "ImagePullBackOff");
  observed = running(job);
  const auto healed = reconcile(job, held.status, observed, kT0 + seconds(60));
  EXPECT_EQ(condition(healed, ConditionType::kPodsNotReady)->status, ConditionStatus::kFalse);
  EXPECT_EQ(condition(healed, ConditionType::kPodsNotReady)->reason, "PodsReady");
  EXPECT_FALSE(healed.status.summary_reason.has_value());
  EXPECT_FALSE(json(healed.status).contains("reason"));
  EXPECT_EQ(json(healed.status)["state"], "Running");
}

TEST(Lifecycle, AnInvalidImageNameFailsTheJobAtOnce) {
  const auto job = make_job();
  auto observed = running(job);
  waiting(pod_named(observed, "j-master-0"), "InvalidImageName", "couldn't parse image name");
  const auto plan = reconcile(job, JobStatus{}, observed, kT0 + seconds(3));
  EXPECT_EQ(json(plan.status)["state"], "Failed");
  EXPECT_EQ(plan.status.summary_reason, "InvalidImageName");
  EXPECT_NE(plan.status.summary_message->find("cannot heal"), std::string::npos);
}

TEST(Lifecycle, APodThatNeverLeavesContainerCreatingStillMeetsItsDeadline) {
  const auto job = make_job(/*startup_deadline=*/60);
  auto observed = running(job);
  waiting(pod_named(observed, "j-evaluator-0"), "ContainerCreating", "");
  const auto early = reconcile(job, JobStatus{}, observed, kT0 + seconds(10));
  EXPECT_FALSE(early.status.is_true(ConditionType::kPodsNotReady));  // on its way: not held yet
  EXPECT_EQ(early.requeue_after, seconds(51));
  const auto late = reconcile(job, early.status, observed, kT0 + seconds(61));
  EXPECT_EQ(late.status.summary_reason, "StartupDeadlineExceeded");
  // A deadline of 0 waits forever.
  const auto forever = reconcile(make_job(0), JobStatus{}, observed, kT0 + seconds(86400));
  EXPECT_NE(json(forever.status)["state"], "Failed");
}

TEST(Lifecycle, APodStuckTerminatingIsReportedThenFailsTheJob) {
  const auto job = make_job(600, /*terminating_deadline=*/60);
  auto observed = running(job);
  // Deleted at kT0 with a 30 s grace period: due at kT0 + 30 s.
  pod_named(observed, "j-worker-0")["metadata"]["deletionTimestamp"] =
      format_time(kT0 + seconds(30));
  const auto within_grace = reconcile(job, JobStatus{}, observed, kT0 + seconds(10));
  EXPECT_FALSE(within_grace.status.is_true(ConditionType::kPodsNotReady));
  const auto stuck = reconcile(job, within_grace.status, observed, kT0 + seconds(50));
  EXPECT_EQ(stuck.status.summary_reason, "PodStuckTerminating");
  EXPECT_EQ(stuck.status.summary_message,
            "pod j-worker-0 is still terminating 20 s after its grace period ended (a finalizer "
            "holds it, or its node stopped answering)");
  EXPECT_EQ(stuck.events.size(), 1U);
  const auto later = reconcile(job, stuck.status, observed, kT0 + seconds(70));
  EXPECT_TRUE(later.events.empty());  // the same pod, a later count: no new Event
  EXPECT_NE(later.status.summary_message->find("40 s"), std::string::npos);
  const auto failed = reconcile(job, later.status, observed, kT0 + seconds(90));
  EXPECT_EQ(json(failed.status)["state"], "Failed");
  EXPECT_EQ(failed.status.summary_reason, "PodStuckTerminating");
  EXPECT_NE(failed.status.summary_message->find("terminatingDeadlineSeconds is 60"),
            std::string::npos);
}

// The kubelet confirms a pod's end by deleting it again with a grace period of 0, which moves its
// deletionTimestamp to that moment: the pod goes a moment later, and no Warning says it is stuck
// (every deleted pod had one, "0 s after its grace period ended"). Still there 5 s on, it is.
TEST(Lifecycle, APodWhoseEndTheKubeletJustConfirmedIsNotReportedStuck) {
  const auto job = make_job(600, /*terminating_deadline=*/60);
  auto observed = running(job);
  auto& pod = pod_named(observed, "j-worker-0");
  pod["metadata"]["deletionTimestamp"] = format_time(kT0);
  pod["metadata"]["deletionGracePeriodSeconds"] = 0;
  const auto confirmed = reconcile(job, JobStatus{}, observed, kT0 + seconds(1));
  EXPECT_FALSE(confirmed.status.is_true(ConditionType::kPodsNotReady));
  EXPECT_TRUE(confirmed.events.empty());
  ASSERT_TRUE(confirmed.requeue_after);
  EXPECT_EQ(*confirmed.requeue_after, seconds(5));  // looked at again when it would be stuck
  const auto stuck = reconcile(job, confirmed.status, observed, kT0 + seconds(6));
  EXPECT_EQ(stuck.status.summary_reason, "PodStuckTerminating");
  EXPECT_EQ(stuck.events.size(), 1U);
}

TEST(Lifecycle, ACreateRefusedForNowIsReportedUntilThePodsExist) {
  const auto job = make_job();
  auto plan = reconcile(job, JobStatus{}, Observed{}, kT0);
  ASSERT_EQ(plan.create_pods.size(), 4U);
  const std::string quota = "pods \"j-worker-0\" is forbidden: exceeded quota: q";
  note_blocked_create(plan, reason::kFailedCreate, quota, kT0);
  EXPECT_EQ(plan.status.summary_reason, "FailedCreate");
  EXPECT_EQ(plan.events.back().reason, "FailedCreate");
  // The next round creates again and keeps the report; the same refusal is no news.
  auto again = reconcile(job, plan.status, no_pods(), kT0 + seconds(10));
  EXPECT_EQ(again.create_pods.size(), 4U);
  EXPECT_EQ(again.status.summary_reason, "FailedCreate");
  note_blocked_create(again, reason::kFailedCreate, quota, kT0 + seconds(10));
  EXPECT_TRUE(again.events.empty());
  // The quota allows them: once they run, nothing is held.
  const auto runs = reconcile(job, again.status, running(job), kT0 + seconds(20));
  EXPECT_FALSE(runs.status.is_true(ConditionType::kPodsNotReady));
  EXPECT_EQ(json(runs.status)["state"], "Running");
}

TEST(Lifecycle, TheRoundThatEndsAJobCreatesNothing) {
  const auto job = make_job();
  auto observed = running(job);
  terminated(pod_named(observed, "j-master-0"), "Succeeded", 0, "", kT0);
  observed.pods.erase(observed.pods.begin());  // a pod gone (the evaluator: sorted first)
  observed.service_exists = false;
  const auto plan = reconcile(job, JobStatus{}, observed, kT0 + seconds(400));
  EXPECT_EQ(json(plan.status)["state"], "Succeeded");
  EXPECT_TRUE(plan.create_pods.empty());
  EXPECT_FALSE(plan.create_service.has_value());
  EXPECT_FALSE(plan.create_token_secret);
}

// The store came back and the chief saved its last checkpoint and ended before the operator scraped
// it again: the job's status must not go on saying, for ever, that the store does not answer.
TEST(Lifecycle, AJobThatSucceedsAfterAStoreOutageSaysTheStoreAnswersAndItsLastCheckpoint) {
  const auto job = make_job();
  auto observed = running(job);
  observed.progress =
      json{{"step", 60},
           {"checkpoint", {{"savedStep", 40}, {"storeUnreachableSince", "2026-11-22T11:59:00Z"}}}};
  const auto away = reconcile(job, testing::running_since(kT0), observed, kT0);
  ASSERT_EQ(json(away.status)["reason"], "StoreNotAnswering");

  terminated(pod_named(observed, "j-master-0"), "Succeeded", 0,
             R"({"epoch": 2, "step": 600, "savedStep": 600})", kT0 + seconds(20));
  terminated(pod_named(observed, "j-evaluator-0"), "Succeeded", 0, R"({"step": 600})",
             kT0 + seconds(20));
  const auto done = reconcile(job, away.status, observed, kT0 + seconds(21));
  EXPECT_EQ(json(done.status)["state"], "Succeeded");
  EXPECT_EQ(done.status.progress["checkpoint"], json({{"savedStep", 600}}));
  EXPECT_FALSE(done.status.is_true(ConditionType::kCheckpointStoreUnreachable));
  EXPECT_EQ(json(done.status)["reason"], "JobSucceeded");
  const auto said = std::find_if(done.events.begin(), done.events.end(),
                                 [](const auto& e) { return e.reason == "StoreAnswers"; });
  ASSERT_NE(said, done.events.end());
  EXPECT_EQ(said->message,
            "the checkpoint store answers again; the newest checkpoint saved: step 600");

  // One that failed keeps what its last scrape said: the store may well be away still.
  terminated(pod_named(observed, "j-master-0"), "Failed", 5, R"({"error": "store away"})",
             kT0 + seconds(20));
  auto never = job;
  never.spec.restart_policy = RestartPolicy::kNever;
  const auto failed = reconcile(never, away.status, observed, kT0 + seconds(21));
  EXPECT_EQ(json(failed.status)["state"], "Failed");
  EXPECT_TRUE(failed.status.is_true(ConditionType::kCheckpointStoreUnreachable));
  EXPECT_EQ(failed.status.progress["checkpoint"]["storeUnreachableSince"], "2026-11-22T11:59:00Z");
}

TEST(Lifecycle, SuccessWaitsForTheEvaluatorsFinalEvaluationAndCarriesItsFigures) {
  const auto job = make_job();
  auto observed = running(job);
  terminated(pod_named(observed, "j-master-0"), "Succeeded", 0,
             R"({"epoch": 2, "step": 600, "loss": 0.61, "trainAccuracy": 0.78})", kT0);
  const json reading = json{{"epoch", 2},
                            {"step", 590},
                            {"progressPercentage", 98},
                            {"estimatedRemainingSeconds", 3},
                            {"testAccuracy", 0.70},
                            {"imagesPerSecond", 512.5}};
  observed.progress = reading;
  const auto waiting_for_it = reconcile(job, JobStatus{}, observed, kT0 + seconds(5));
  EXPECT_EQ(json(waiting_for_it.status)["state"], "Running");
  EXPECT_EQ(json(waiting_for_it.status)["conditions"].back()["reason"], "FinalEvaluation");
  EXPECT_TRUE(waiting_for_it.delete_pods.empty());  // the evaluator is left to finish
  EXPECT_EQ(waiting_for_it.requeue_after, seconds(296));

  terminated(pod_named(observed, "j-evaluator-0"), "Succeeded", 0,
             R"({"step": 600, "testAccuracy": 0.8870})", kT0 + seconds(20));
  const auto done = reconcile(job, waiting_for_it.status, observed, kT0 + seconds(21));
  EXPECT_EQ(json(done.status)["state"], "Succeeded");
  const auto progress = done.status.progress;
  EXPECT_EQ(progress["progressPercentage"], 100);
  EXPECT_FALSE(progress.contains("estimatedRemainingSeconds"));
  EXPECT_EQ(progress["step"], 600);
  EXPECT_DOUBLE_EQ(progress["loss"].get<double>(), 0.61);
  EXPECT_DOUBLE_EQ(progress["testAccuracy"].get<double>(), 0.8870);  // the final checkpoint's
  EXPECT_EQ(progress["updatedAt"], "2026-11-22T12:00:21Z");
  // A finished job's status is not the scraper's any more.
  const auto after = reconcile(job, done.status, observed, kT0 + seconds(40));
  EXPECT_EQ(after.status.progress, progress);
}

TEST(Lifecycle, TheEvaluatorsWaitIsBounded) {
  const auto job = make_job();
  auto observed = running(job);
  terminated(pod_named(observed, "j-master-0"), "Succeeded", 0, "{}", kT0);
  const auto plan = reconcile(job, JobStatus{}, observed, kT0 + seconds(300));
  EXPECT_EQ(json(plan.status)["state"], "Succeeded");
  EXPECT_NE(plan.status.summary_message->find("did not finish its final evaluation in time"),
            std::string::npos);
  EXPECT_EQ(plan.delete_pods.size(), 3U);  // the evaluator, the PS and the worker
}

TEST(Lifecycle, AFailedPodsOwnWordsAreInTheJobsReason) {
  auto job = make_job();
  job.spec.restart_policy = RestartPolicy::kNever;
  auto observed = running(job);
  terminated(
      pod_named(observed, "j-worker-0"), "Failed", 1,
      R"({"error": "data: /data/cifar-10-batches-bin/data_batch_3.bin: truncated at byte 1024"})",
      kT0);
  const auto plan = reconcile(job, JobStatus{}, observed, kT0 + seconds(1));
  EXPECT_EQ(plan.status.summary_reason, "PodFailed");
  EXPECT_EQ(plan.status.summary_message,
            "pod j-worker-0 failed with exit code 1: data: "
            "/data/cifar-10-batches-bin/data_batch_3.bin: truncated at byte 1024; restartPolicy "
            "Never");
  // A message that is the end of a log (FallbackToLogsOnError): its last line.
  terminated(pod_named(observed, "j-worker-0"), "Failed", 2,
             "[12:00:00] starting\n[12:00:01] [error] --lr: must be positive\n", kT0);
  EXPECT_NE(reconcile(job, JobStatus{}, observed, kT0 + seconds(1))
                .status.summary_message->find("exit code 2: [12:00:01] [error] --lr: must be "
                                              "positive; restartPolicy Never"),
            std::string::npos);
}

// The running job with j-worker-0 restarted in place by the kubelet (OnFailure): it runs again,
// its last run ended with `exit_code` and termination message `message`.
Observed restarted_in_place(const Job& job, int exit_code, const std::string& message) {
  auto observed = running(job);
  auto& pod = pod_named(observed, "j-worker-0");
  pod["status"]["containerStatuses"][0]["restartCount"] = 1;
  pod["status"]["containerStatuses"][0]["lastState"] = {
      {"terminated",
       {{"exitCode", exit_code}, {"message", message}, {"finishedAt", format_time(kT0)}}}};
  return observed;
}

// A store that refuses (contract::kExitStoreUnavailable) fails the job at once, even under
// OnFailure (which retries every other failure): no crash loop, and a reason of its own.
TEST(Lifecycle, AStoreThatRefusesFailsTheJobAtOnceWithItsOwnReason) {
  auto job = make_job();
  ASSERT_EQ(job.spec.restart_policy, RestartPolicy::kOnFailure);
  auto observed = running(job);
  terminated(pod_named(observed, "j-worker-0"), "Failed", 5,
             R"({"error": "checkpoint store s3://ckpt/ns/j-uid unavailable: s3://ckpt at )"
             R"(http://store:8333: GET answered 404 NoSuchBucket"})",
             kT0);
  const auto plan = reconcile(job, JobStatus{}, observed, kT0 + seconds(1));
  EXPECT_EQ(plan.status.summary_reason, "CheckpointStoreUnavailable");
  EXPECT_EQ(plan.status.summary_message,
            "pod j-worker-0 failed with exit code 5: checkpoint store s3://ckpt/ns/j-uid "
            "unavailable: s3://ckpt at http://store:8333: GET answered 404 NoSuchBucket; not "
            "retried: fix the store or checkpoint.s3 and submit the job again");
  EXPECT_EQ(plan.status.restarts.value_or(0), 0);

  // The same, seen as the kubelet restarting the container in place (OnFailure): the pod runs
  // again, its last run ended with 5.
  const auto restarted = restarted_in_place(
      job, 5, R"({"error": "checkpoint store s3://ckpt unavailable: NoSuchBucket"})");
  const auto in_place = reconcile(job, JobStatus{}, restarted, kT0 + seconds(1));
  EXPECT_EQ(in_place.status.summary_reason, "CheckpointStoreUnavailable");
  EXPECT_NE(in_place.status.summary_message->find("exit code 5"), std::string::npos)
      << *in_place.status.summary_message;
  // Not a restart of the job's: nothing asked for it, and nothing is retried (an e2e run saw the
  // PS restarted in place before the master's refusal ended the job, and counted it).
  EXPECT_EQ(in_place.status.restarts.value_or(0), 0);
  // Nor later, the job Failed and its pod not yet gone (CI saw it charged then).
  ASSERT_TRUE(in_place.status.finished());
  const auto after = reconcile(job, in_place.status, restarted, kT0 + seconds(2));
  EXPECT_EQ(after.status.restarts.value_or(0), 0);
}

// So does a dataset whose objects are missing, wrong or refused (contract::kExitDataUnavailable):
// a restart would read the same objects. Also restarted in place, and charged nothing.
TEST(Lifecycle, ADatasetThatCannotBeReadFailsTheJobAtOnceWithItsOwnReason) {
  auto job = make_job();
  auto observed = running(job);
  const std::string error =
      "data: dataset object s3://data/c10/data_batch_3.bin has 6046 bytes, not a whole number of "
      "3073-byte records: truncated, or not this dataset's file";
  terminated(pod_named(observed, "j-worker-0"), "Failed", 6,
             nlohmann::json{{"error", error}}.dump(), kT0);
  const auto plan = reconcile(job, JobStatus{}, observed, kT0 + seconds(1));
  EXPECT_EQ(plan.status.summary_reason, "DatasetUnavailable");
  EXPECT_EQ(plan.status.summary_message,
            "pod j-worker-0 failed with exit code 6: " + error +
                "; not retried: fix the dataset's objects or its store and submit the job again");
  EXPECT_EQ(plan.status.restarts.value_or(0), 0);

  const auto restarted = restarted_in_place(job, 6, nlohmann::json{{"error", error}}.dump());
  const auto in_place = reconcile(job, JobStatus{}, restarted, kT0 + seconds(1));
  EXPECT_EQ(in_place.status.summary_reason, "DatasetUnavailable");
  EXPECT_EQ(in_place.status.restarts.value_or(0), 0);
}

// A long error (a store away past the bound names its model dir three times) keeps both ends in
// the job's message: what failed, and the newest checkpoint saved, which the runtime says last.
TEST(Lifecycle, ALongErrorKeepsWhatFailedAndWhatWasSaved) {
  auto job = make_job();
  auto observed = running(job);
  const std::string dir = "s3://checkpoints/" + std::string(120, 'd');
  const std::string error = "checkpoint store " + dir + " unavailable: checkpoint step 28 not " +
                            "saved: " + dir +
                            " did not answer GET x.fence for 15 s; last error: " + dir +
                            "/x.fence at https://10.0.0.1:8333: no answer to GET (" +
                            std::string(400, 'c') + "); the newest checkpoint saved is step 24";
  ASSERT_GT(error.size(), 1000U);
  terminated(pod_named(observed, "j-worker-0"), "Failed", 5, json{{"error", error}}.dump(), kT0);
  const auto message =
      *reconcile(job, JobStatus{}, observed, kT0 + seconds(1)).status.summary_message;
  EXPECT_NE(message.find("exit code 5: checkpoint store " + dir +
                         " unavailable: checkpoint step "
                         "28 not saved"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(" [...] "), std::string::npos) << message;
  EXPECT_NE(message.find("the newest checkpoint saved is step 24; not retried"), std::string::npos)
      << message;
  EXPECT_LT(message.size(), 1200U) << message;
}

TEST(Lifecycle, TheScrapersReadingIsWrittenByTheReconcile) {
  const auto job = make_job();
  auto observed = running(job);
  observed.progress = json{{"step", 10}, {"updatedAt", "2026-11-22T12:00:10Z"}};
  const auto plan = reconcile(job, JobStatus{}, observed, kT0 + seconds(10));
  EXPECT_EQ(plan.status.progress["step"], 10);
}

// A job is a run: the same name applied again (a new UID), or in another namespace on a shared
// volume, gets a model dir of its own; resumeFrom continues an earlier run on purpose.
TEST(RunIdentity, TheModelDirIsKeyedByNamespaceNameAndUidAndSaidInTheStatus) {
  auto job = make_job();
  const auto plan = reconcile(job, JobStatus{}, Observed{}, kT0);
  EXPECT_EQ(plan.status.model_dir, "/checkpoints/ns/j-uid");
  EXPECT_EQ(json(plan.status)["modelDir"], "/checkpoints/ns/j-uid");
  const auto args = plan.create_pods.at(0)["spec"]["containers"][0]["args"];
  EXPECT_NE(std::find(args.begin(), args.end(), "/checkpoints/ns/j-uid"), args.end());
  auto again = job;
  again.uid = "uid-2";
  EXPECT_EQ(model_dir(again), "/checkpoints/ns/j-uid-2");
  again.spec.resume_from = "ns/j-uid";
  EXPECT_EQ(model_dir(again), "/checkpoints/ns/j-uid");
  // Once chosen, the run's directory stays, whatever is edited later; a job an operator started
  // before status.modelDir existed stays in <path>/<name>.
  auto edited = job;
  edited.spec.resume_from = "elsewhere";
  const auto later = reconcile(edited, plan.status, Observed{}, kT0 + seconds(5));
  EXPECT_EQ(later.status.model_dir, "/checkpoints/ns/j-uid");
  for (const auto& pod : later.create_pods) {
    const auto pod_args = pod["spec"]["containers"][0]["args"];
    EXPECT_NE(std::find(pod_args.begin(), pod_args.end(), "/checkpoints/ns/j-uid"), pod_args.end());
  }
  JobStatus started_before;
  started_before.start_time = to_time(kT0);
  EXPECT_EQ(reconcile(job, started_before, Observed{}, kT0).status.model_dir, "/checkpoints/j");
}

// A pod that a queue's scheduling gate holds (Kueue's, until it admits the job) waits for no
// fault: it is not held back, and no startup deadline runs for it.
TEST(Lifecycle, APodHeldByASchedulingGateHasNoStartupDeadline) {
  const auto job = make_job(/*startup_deadline=*/60);
  auto observed = running(job);
  auto& gated = pod_named(observed, "j-worker-0");
  gated["spec"]["schedulingGates"] = json::array({{{"name", "kueue.x-k8s.io/admission"}}});
  gated["status"] = {{"phase", "Pending"},
                     {"conditions",
                      {{{"type", "PodScheduled"},
                        {"status", "False"},
                        {"reason", "SchedulingGated"},
                        {"message", "Scheduling is blocked due to non-empty scheduling gates"}}}}};
  const auto plan = reconcile(job, JobStatus{}, observed, kT0 + seconds(3600));
  EXPECT_NE(json(plan.status)["state"], "Failed");
  EXPECT_FALSE(plan.status.is_true(ConditionType::kPodsNotReady));
}

// An orphan of an earlier job of the same name (deleted with --cascade=orphan), or a user's own
// pod with the job's label, is never the job's: not counted (its success ends nothing), not
// deleted, its name not created, and reported.
TEST(RunIdentity, PodsOfItsNamesThatItDoesNotControlAreReportedAndLeftAlone) {
  const auto job = make_job();
  Observed observed;
  observed.service_exists = true;
  observed.foreign_pods["j-master-0"] = "no controller";
  const auto plan = reconcile(job, JobStatus{}, observed, kT0);
  // Nor its parameter servers: each is told the chief's number, unknown until the chief is made.
  std::set<std::string> made;
  for (const auto& pod : plan.create_pods) made.insert(pod["metadata"]["name"]);
  EXPECT_EQ(made, (std::set<std::string>{"j-worker-0", "j-evaluator-0"}));
  EXPECT_EQ(plan.status.summary_reason, "NotOwned");
  EXPECT_EQ(plan.status.summary_message,
            "pod j-master-0 exists and is not managed by this job (its controller: no "
            "controller); delete it, or give the job another name");
  ASSERT_EQ(plan.events.size(), 2U);  // JobCreated, then the warning
  EXPECT_EQ(plan.events[1].reason, "NotOwned");
  EXPECT_TRUE(plan.delete_pods.empty());
  EXPECT_NE(json(plan.status)["state"], "Succeeded");
  // Once it is gone, the job makes its own.
  observed.foreign_pods.clear();
  const auto after = reconcile(job, plan.status, observed, kT0 + seconds(5));
  EXPECT_EQ(after.create_pods.size(), 4U);
  // The chief and its parameter server made together: the number the PS holds the run for is the
  // chief's own (an e2e run made the PS a round before the chief, which then crash-looped as
  // "replaced by incarnation 2").
  std::map<std::string, json> by_name;
  for (const auto& pod : after.create_pods) by_name[pod["metadata"]["name"]] = pod;
  ASSERT_EQ(by_name.count("j-ps-0"), 1U);
  ASSERT_EQ(by_name.count("j-master-0"), 1U);
  EXPECT_EQ(env_of(by_name["j-ps-0"], contract::env::kChiefIncarnation),
            env_of(by_name["j-master-0"], contract::env::kIncarnation));
}

TEST(FinalProgress, TheEvaluatorsAccuracyCountsOnlyAtTheChiefsLastStep) {
  const auto stale =
      final_progress(json(), R"({"step": 600, "testAccuracy": 0.5})",
                     R"({"step": 300, "testAccuracy": 0.9})", true, "2026-11-22T12:00:00Z");
  EXPECT_DOUBLE_EQ(stale["testAccuracy"].get<double>(), 0.5);
  const auto fresh =
      final_progress(json(), R"({"step": 600})", R"({"step": 600, "testAccuracy": 0.9})", true,
                     "2026-11-22T12:00:00Z");
  EXPECT_DOUBLE_EQ(fresh["testAccuracy"].get<double>(), 0.9);
}

TEST(Lifecycle, AnErrorThatIsNoStringInATerminationMessageIsIgnored) {
  auto job = make_job();
  job.spec.restart_policy = RestartPolicy::kNever;
  auto observed = running(job);
  terminated(pod_named(observed, "j-worker-0"), "Failed", 1, R"({"error": 42})", kT0);
  const auto plan = reconcile(job, JobStatus{}, observed, kT0 + seconds(1));
  EXPECT_EQ(plan.status.summary_message,
            "pod j-worker-0 failed with exit code 1; restartPolicy Never");
}

TEST(FinalProgress, KeepsWhereAFailedJobStoppedAndIgnoresMessagesThatAreNotFigures) {
  const auto last =
      json{{"step", 300}, {"progressPercentage", 50}, {"estimatedRemainingSeconds", 9}};
  const auto progress =
      final_progress(last, "Segmentation fault", "", /*succeeded=*/false, "2026-11-22T12:00:00Z");
  EXPECT_EQ(progress["progressPercentage"], 50);
  EXPECT_EQ(progress["step"], 300);
  EXPECT_FALSE(progress.contains("estimatedRemainingSeconds"));
  const auto none = final_progress(json(), "", "", true, "2026-11-22T12:00:00Z");
  EXPECT_EQ(none["progressPercentage"], 100);
}

}  // namespace
}  // namespace cifar::op::lifecycle_test
