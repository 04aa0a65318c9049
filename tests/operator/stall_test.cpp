// The stall rule (cifartrainjob/stall.h): when a Running job is Stalled, what it says, and what
// runPolicy.onStall does; and how the scraper's rounds become what the rule reads (liveness.h).
// Pure, with a fixed clock.
#include "cifartrainjob/stall.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/liveness.h"
#include "cifartrainjob/reconcile.h"
#include "tests/operator/fixtures.h"

namespace cifar::op::stall_test {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using testing::kT0;

constexpr double kLimit = 300;
const Clock::time_point kFrozenAt = kT0 + seconds(1000);

Job make_job(bool parameter_server, const std::string& on_stall = "Restart", int backoff = 3) {
  json spec = json::parse(R"({"image": "i", "model": {"name": "simplecnn"},
    "dataset": {"name": "cifar10"}, "checkpoint": {"volume": {"claimName": "checkpoints"}}})");
  spec["strategy"] = {{"type", parameter_server ? "ParameterServer" : "AllReduce"}};
  spec["replicaSpecs"] = parameter_server ? json{{"PS", {{"replicas", 1}}},
                                                 {"Master", {{"replicas", 1}}},
                                                 {"Worker", {{"replicas", 1}}}}
                                          : json{{"Worker", {{"replicas", 2}}}};
  spec["runPolicy"] = {{"onStall", on_stall}, {"backoffLimit", backoff}};
  return Job{"j", "ns", "uid", parse_spec(spec), ""};
}

// Every pod created and running since kT0.
Observed running(const Job& job) {
  auto o = testing::no_pods();
  for (const auto& p : desired_pods(job)) o.pods.push_back(testing::running_pod(p, kT0));
  return o;
}

const json& pod_of(const Observed& o, const std::string& name) {
  return *std::find_if(o.pods.begin(), o.pods.end(),
                       [&](const json& p) { return p["metadata"]["name"] == name; });
}

// What the scraper heard from `name` at `at`: `quiet` seconds without progress, a stall report.
void heard(Observed& o, const std::string& name, Clock::time_point at, double quiet,
           const std::string& report = "", int64_t steps = 100, double limit = kLimit) {
  PodLiveness record;
  record.uid = pod_of(o, name)["metadata"]["uid"];
  record.steps = steps;
  record.seconds_since_progress = quiet;
  record.stall_limit_seconds = limit;
  record.stall_report = report;
  record.answered_at = at;
  o.liveness[name] = record;
}

// `name` missed the scrapes since its last answer.
void silent(Observed& o, const std::string& name) {
  o.liveness.at(name).missed_scrapes = kSilentAfterMissed;
}

const std::string kWaitingOnRank =
    "stalled: no progress for 301 s (limit 300 s); waiting on gradient all-reduce, bucket 2 of 2 "
    "with rank 0's group: the other rank for 301 s; main thread in "
    "cifar::allreduce::GradientBuckets::end_backward()";
const std::string kWaitingOnPs =
    "stalled: no progress for 301 s (limit 300 s); waiting on push with PS shard 0 "
    "(j-ps-0.j.ns.svc:2222, stripe 0) for 301 s";

// Rank 1 frozen at kFrozenAt (its last answer), rank 0 waiting for it in a collective and saying
// so once its limit passed.
Observed frozen_rank(const Job& job, Clock::time_point now) {
  auto o = running(job);
  heard(o, "j-worker-0", now, 301, kWaitingOnRank, 120);
  heard(o, "j-worker-1", kFrozenAt, 0.5, "", 119);
  silent(o, "j-worker-1");
  return o;
}

bool has_event(const Plan& plan, std::string_view type, std::string_view reason) {
  return std::any_of(plan.events.begin(), plan.events.end(),
                     [&](const EventRecord& e) { return e.type == type && e.reason == reason; });
}

TEST(Stall, AnAllReduceJobWithARankFrozenIsStalledNamingBothRanksAndItsGroupIsReplaced) {
  const auto job = make_job(/*parameter_server=*/false);
  const auto now = kFrozenAt + seconds(302);
  const auto plan = reconcile(job, testing::running_since(kT0), frozen_rank(job, now), now);
  const auto* stalled = plan.status.condition(ConditionType::kStalled);
  ASSERT_NE(stalled, nullptr);
  EXPECT_EQ(stalled->status, ConditionStatus::kTrue);
  EXPECT_EQ(stalled->reason, reason::kTrainersStalled);
  EXPECT_EQ(stalled->message,
            "no trainer has progressed for 301 s (stall limit 300 s): j-worker-0 at step 120 [" +
                kWaitingOnRank +
                "]; j-worker-1 at step 119 (1 behind) [stopped answering 302 s ago]");
  // The group restarts together: one restart of the job, charged to backoffLimit.
  std::vector<std::string> deleted = plan.delete_pods;
  std::sort(deleted.begin(), deleted.end());
  EXPECT_EQ(deleted, (std::vector<std::string>{"j-worker-0", "j-worker-1"}));
  EXPECT_EQ(plan.status.restarts, 1);
  ASSERT_TRUE(has_event(plan, "Warning", reason::kTrainersStalled));
  EXPECT_NE(plan.events.back().message.find("replacing j-worker-0, j-worker-1 (restart 1)"),
            std::string::npos)
      << plan.events.back().message;
  // While the group goes and comes back nothing is judged: the condition stands, nothing more
  // is replaced or charged.
  auto going = frozen_rank(job, now + seconds(1));
  for (auto& pod : going.pods)
    pod["metadata"]["deletionTimestamp"] = format_time(now + seconds(30));
  const auto next = reconcile(job, plan.status, going, now + seconds(1));
  EXPECT_TRUE(next.status.is_true(ConditionType::kStalled));
  EXPECT_TRUE(next.events.empty());
  EXPECT_EQ(next.status.restarts, 1);
  auto back = running(job);  // new pods, not heard yet
  const auto after = reconcile(job, plan.status, back, now + seconds(40));
  EXPECT_TRUE(after.status.is_true(ConditionType::kStalled));
  EXPECT_TRUE(after.delete_pods.empty());
  // Heard progressing: cleared.
  heard(back, "j-worker-0", now + seconds(45), 1);
  heard(back, "j-worker-1", now + seconds(45), 1);
  const auto cleared = reconcile(job, after.status, back, now + seconds(45));
  EXPECT_EQ(cleared.status.condition(ConditionType::kStalled)->status, ConditionStatus::kFalse);
  EXPECT_TRUE(has_event(cleared, "Normal", reason::kProgressing));
}

TEST(Stall, AStoppedParameterServerIsWhatIsReplacedNotTheTrainersWaitingForIt) {
  const auto job = make_job(/*parameter_server=*/true);
  const auto now = kFrozenAt + seconds(302);
  auto o = running(job);
  heard(o, "j-master-0", now, 301, kWaitingOnPs, 50);
  heard(o, "j-worker-0", now, 301, kWaitingOnPs, 50);
  heard(o, "j-ps-0", kFrozenAt, 0, "", 0, 0);
  silent(o, "j-ps-0");
  const auto plan = reconcile(job, testing::running_since(kT0), o, now);
  ASSERT_TRUE(plan.status.is_true(ConditionType::kStalled));
  EXPECT_EQ(plan.delete_pods, (std::vector<std::string>{"j-ps-0"}));
  EXPECT_NE(plan.status.condition(ConditionType::kStalled)
                ->message.find("; j-ps-0 stopped answering 302 s ago"),
            std::string::npos);
}

TEST(Stall, NoStallWhileOneTrainerProgressesAndALookAgainWhenASilentOnesLimitWillPass) {
  const auto job = make_job(false);
  auto o = running(job);
  const auto now = kFrozenAt + seconds(100);
  // Rank 0 reports a stall; rank 1 went silent 100 s ago, after 10 s without progress: stalled
  // 190 s from now, when the operator must look again with no new word from anyone.
  heard(o, "j-worker-0", now, 301, kWaitingOnRank);
  heard(o, "j-worker-1", kFrozenAt, 10);
  silent(o, "j-worker-1");
  const auto plan = reconcile(job, testing::running_since(kT0), o, now);
  EXPECT_EQ(plan.status.condition(ConditionType::kStalled), nullptr);
  EXPECT_TRUE(plan.delete_pods.empty());
  ASSERT_TRUE(plan.requeue_after.has_value());
  EXPECT_LE(*plan.requeue_after, seconds(191));
  // One trainer that answers and progresses: no stall, whatever the other says.
  heard(o, "j-worker-1", now, 2);
  const auto progressing = reconcile(job, testing::running_since(kT0), o, now);
  EXPECT_EQ(progressing.status.condition(ConditionType::kStalled), nullptr);
}

TEST(Stall, SilenceAloneIsNoStallOfTheJobsNorAreTrainersNotHeardYetOrWithoutAWatchdog) {
  const auto job = make_job(false);
  const auto now = kFrozenAt + seconds(1000);
  // Every pod silent: the operator cannot reach them (its own network), none said it stalled.
  auto unreachable = running(job);
  heard(unreachable, "j-worker-0", kFrozenAt, 0);
  heard(unreachable, "j-worker-1", kFrozenAt, 0);
  silent(unreachable, "j-worker-0");
  silent(unreachable, "j-worker-1");
  EXPECT_FALSE(judge_stall(job, {}, unreachable.liveness, now).stalled);
  EXPECT_FALSE(judge_stall(job, pods_by_name(unreachable.pods), unreachable.liveness, now).stalled);
  // A trainer not heard yet (starting), or one with no watchdog (stallTimeoutSeconds 0).
  auto starting = frozen_rank(job, now);
  starting.liveness.erase("j-worker-1");
  EXPECT_FALSE(reconcile(job, testing::running_since(kT0), starting, now)
                   .status.is_true(ConditionType::kStalled));
  auto off = frozen_rank(job, now);
  off.liveness.at("j-worker-0").stall_limit_seconds = 0;
  EXPECT_FALSE(reconcile(job, testing::running_since(kT0), off, now)
                   .status.is_true(ConditionType::kStalled));
  // The record of an earlier pod of the name is not the pod's.
  auto recreated = frozen_rank(job, now);
  recreated.liveness.at("j-worker-1").uid = "an-earlier-pod";
  EXPECT_FALSE(reconcile(job, testing::running_since(kT0), recreated, now)
                   .status.is_true(ConditionType::kStalled));
}

// Rank 1 stopped before the scraper ever heard it (the CI run of 2026-11-29: frozen ~3 s after its
// metrics came up): its misses alone are known, and its time running is its time without progress.
TEST(Stall, ARankStoppedBeforeItsFirstAnswerIsJudgedByItsTimeRunning) {
  const auto job = make_job(false);
  auto o = running(job);
  const auto missed_only = [&](int misses) {
    PodLiveness record;
    record.uid = pod_of(o, "j-worker-1")["metadata"]["uid"];
    record.missed_scrapes = misses;
    o.liveness["j-worker-1"] = record;
  };
  // One miss: it may be starting; nothing is judged.
  auto now = kT0 + seconds(302);
  heard(o, "j-worker-0", now, 301, kWaitingOnRank, 120);
  missed_only(1);
  EXPECT_FALSE(judge_stall(job, pods_by_name(o.pods), o.liveness, now).stalled);
  // Silent, but running for less than the limit: look again when it will have run it.
  missed_only(kSilentAfterMissed);
  now = kT0 + seconds(100);
  heard(o, "j-worker-0", now, 301, kWaitingOnRank, 120);
  const auto early = judge_stall(job, pods_by_name(o.pods), o.liveness, now);
  EXPECT_FALSE(early.stalled);
  ASSERT_TRUE(early.look_again_in.has_value());
  EXPECT_LE(*early.look_again_in, seconds(202));
  // Past it: stalled, the group replaced.
  now = kT0 + seconds(302);
  heard(o, "j-worker-0", now, 301, kWaitingOnRank, 120);
  const auto plan = reconcile(job, testing::running_since(kT0), o, now);
  ASSERT_TRUE(plan.status.is_true(ConditionType::kStalled));
  EXPECT_NE(plan.status.condition(ConditionType::kStalled)
                ->message.find("; j-worker-1 [never answered in 302 s running]"),
            std::string::npos)
      << plan.status.condition(ConditionType::kStalled)->message;
  EXPECT_EQ(plan.delete_pods.size(), 2U);
}

// A silent trainer's last word may be its start-up floor (no step yet: the runtime applies at
// least 300 s until its first step whatever the job asks) or no limit at all (its watchdog had
// not polled yet): it is judged by the limit of the trainers that answer.
TEST(Stall, ASilentTrainerIsJudgedByTheLimitOfThoseThatAnswerNotByItsLastWord) {
  const auto job = make_job(false);
  const auto now = kFrozenAt + seconds(25);
  for (const double its_last_limit : {300.0, 0.0}) {
    auto o = running(job);
    heard(o, "j-worker-0", now, 21, kWaitingOnRank, 12, /*limit=*/20);
    heard(o, "j-worker-1", kFrozenAt, 0.5, "", 11, its_last_limit);
    silent(o, "j-worker-1");
    const auto verdict = judge_stall(job, pods_by_name(o.pods), o.liveness, now);
    EXPECT_TRUE(verdict.stalled) << its_last_limit;
    EXPECT_EQ(verdict.limit_seconds, 20) << its_last_limit;
  }
}

// A stall is charged to the node of the pod it is pinned on (the rank that stopped answering); a
// node's second makes it suspect, and the pods made from then on avoid it.
TEST(Stall, ASecondStallPinnedOnANodeMakesItSuspectAndTheReplacementsAvoidIt) {
  const auto job = make_job(false, "Restart", /*backoff=*/6);
  const auto now = kFrozenAt + seconds(302);
  const auto on_nodes = [&](Observed o) {
    testing::pod_named(o, "j-worker-0")["spec"]["nodeName"] = "n1";
    testing::pod_named(o, "j-worker-1")["spec"]["nodeName"] = "n2";
    return o;
  };
  const auto first =
      reconcile(job, testing::running_since(kT0), on_nodes(frozen_rank(job, now)), now);
  ASSERT_EQ(first.delete_pods.size(), 2U);
  EXPECT_EQ(first.status.stalls_by_node, (std::map<std::string, int64_t>{{"n2", 1}}));
  EXPECT_FALSE(first.status.suspect_nodes.has_value());
  EXPECT_FALSE(has_event(first, "Warning", reason::kNodeSuspect));
  // The replacements stalled there again, with rank 1 silent on n2 once more.
  auto status = first.status;
  status.conditions->clear();
  status.set_state(ConditionType::kRunning, reason::kJobRunning, "", to_time(now));
  const auto second = reconcile(job, status, on_nodes(frozen_rank(job, now)), now);
  EXPECT_EQ(second.status.stalls_by_node, (std::map<std::string, int64_t>{{"n2", 2}}));
  EXPECT_EQ(second.status.suspect_nodes, std::vector<std::string>{"n2"});
  ASSERT_TRUE(has_event(second, "Warning", reason::kNodeSuspect));
  // The group's new pods keep off n2.
  auto gone = testing::no_pods();
  const auto recreate = reconcile(job, second.status, gone, now + seconds(30));
  ASSERT_EQ(recreate.create_pods.size(), 2U);
  for (const auto& pod : recreate.create_pods) {
    const auto terms = pod["spec"]["affinity"]["nodeAffinity"]
                          ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    ASSERT_EQ(terms.size(), 1U) << pod.dump();
    EXPECT_EQ(terms[0]["matchExpressions"][0],
              json::parse(R"({"key": "kubernetes.io/hostname", "operator": "NotIn",
                              "values": ["n2"]})"));
  }
  // A stall that sets no pod apart (every trainer answers, at the same step) charges no node.
  auto even = on_nodes(running(job));
  heard(even, "j-worker-0", now, 301, kWaitingOnRank, 120);
  heard(even, "j-worker-1", now, 301, kWaitingOnRank, 120);
  const auto verdict = judge_stall(job, pods_by_name(even.pods), even.liveness, now);
  EXPECT_TRUE(verdict.stalled);
  EXPECT_TRUE(verdict.pinned_on.empty());
}

TEST(Stall, NoJobIsJudgedWhileATrainerIsBeingDeletedOrTheJobIsNotRunning) {
  const auto job = make_job(false);
  const auto now = kFrozenAt + seconds(302);
  auto stopping = frozen_rank(job, now);
  testing::pod_named(stopping, "j-worker-1")["metadata"]["deletionTimestamp"] =
      format_time(now + seconds(30));
  // A trainer going (a graceful stop, a replacement): the job is not judged until its group is
  // whole again, whatever the others say.
  const auto one_going = reconcile(job, testing::running_since(kT0), stopping, now);
  EXPECT_FALSE(one_going.status.is_true(ConditionType::kStalled));
  EXPECT_TRUE(one_going.delete_pods.empty());
  auto both = frozen_rank(job, now);
  for (const auto* name : {"j-worker-0", "j-worker-1"}) {
    testing::pod_named(both, name)["metadata"]["deletionTimestamp"] = format_time(now);
  }
  EXPECT_FALSE(reconcile(job, testing::running_since(kT0), both, now)
                   .status.is_true(ConditionType::kStalled));
  auto suspending = job;
  suspending.spec.suspend = true;
  EXPECT_FALSE(reconcile(suspending, testing::running_since(kT0), frozen_rank(job, now), now)
                   .status.is_true(ConditionType::kStalled));
}

TEST(Stall, OnStallReportSaysItOnceAndSaysWhenTheTrainersProgressAgain) {
  const auto job = make_job(false, "Report");
  const auto now = kFrozenAt + seconds(302);
  const auto first = reconcile(job, testing::running_since(kT0), frozen_rank(job, now), now);
  ASSERT_TRUE(first.status.is_true(ConditionType::kStalled));
  EXPECT_TRUE(first.delete_pods.empty());
  ASSERT_EQ(first.events.size(), 1U);
  EXPECT_EQ(first.events[0].reason, reason::kTrainersStalled);
  EXPECT_NE(first.events[0].message.find("runPolicy.onStall Report: reported only"),
            std::string::npos);
  // The next round: the same stall, no second Event, the message as it began.
  const auto second =
      reconcile(job, first.status, frozen_rank(job, now + seconds(15)), now + seconds(15));
  EXPECT_TRUE(second.events.empty());
  EXPECT_EQ(second.status.condition(ConditionType::kStalled)->message,
            first.status.condition(ConditionType::kStalled)->message);
  EXPECT_EQ(second.status.summary_reason, std::string(reason::kTrainersStalled));
  // Thawed: both answer and progress.
  auto thawed = running(job);
  heard(thawed, "j-worker-0", now + seconds(30), 1);
  heard(thawed, "j-worker-1", now + seconds(30), 1);
  const auto third = reconcile(job, second.status, thawed, now + seconds(30));
  const auto* stalled = third.status.condition(ConditionType::kStalled);
  ASSERT_NE(stalled, nullptr);
  EXPECT_EQ(stalled->status, ConditionStatus::kFalse);
  EXPECT_EQ(stalled->reason, reason::kProgressing);
  EXPECT_TRUE(has_event(third, "Normal", reason::kProgressing));
}

TEST(Stall, OnStallFailFailsTheJobSayingWhy) {
  const auto job = make_job(false, "Fail");
  const auto now = kFrozenAt + seconds(302);
  const auto plan = reconcile(job, testing::running_since(kT0), frozen_rank(job, now), now);
  ASSERT_TRUE(plan.status.is_true(ConditionType::kFailed));
  const auto* failed = plan.status.condition(ConditionType::kFailed);
  EXPECT_EQ(failed->reason, reason::kTrainersStalled);
  EXPECT_NE(failed->message.find("j-worker-1 at step 119 (1 behind) [stopped answering"),
            std::string::npos);
  EXPECT_NE(failed->message.find("; runPolicy.onStall Fail"), std::string::npos);
}

TEST(Stall, PodsReplacedForAStallGetAWholeLimitBeforeTheNextAndPastBackoffLimitTheJobFails) {
  const auto job = make_job(false, "Restart", /*backoff=*/3);
  const auto now = kFrozenAt + seconds(302);
  // The pods came back 100 s ago and are stalled again at once (their stall reports still stand):
  // not replaced again until they have run a whole limit.
  auto young = frozen_rank(job, now);
  for (auto& pod : young.pods) pod = testing::running_pod(pod, now - seconds(100));
  const auto waiting = reconcile(job, testing::running_since(kT0), young, now);
  EXPECT_TRUE(waiting.status.is_true(ConditionType::kStalled));
  EXPECT_TRUE(waiting.delete_pods.empty());
  // Three restarts charged already: the stall's is one more than backoffLimit 3.
  auto status = testing::running_since(kT0);
  status.restarts = 3;
  status.pod_restarts = std::map<std::string, int64_t>{{"an-earlier-pod", 3}};
  const auto over = reconcile(job, status, frozen_rank(job, now), now);
  const auto* failed = over.status.condition(ConditionType::kFailed);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->reason, reason::kBackoffLimitExceeded);
  EXPECT_NE(failed->message.find("the last for a stall: no trainer has progressed"),
            std::string::npos)
      << failed->message;
}

TEST(Liveness, AScrapeRoundReplacesAnswersCountsMissesAndSaysWhatTheStallRuleWouldSee) {
  JobLiveness known;
  PodLiveness answer;
  answer.uid = "u1";
  answer.stall_limit_seconds = kLimit;
  // A pod heard for the first time is news; the same word again is not.
  EXPECT_TRUE(merge_heard(known, {{"p", answer}}, {}));
  EXPECT_FALSE(merge_heard(known, {{"p", answer}}, {}));
  // A stall reported, and over.
  auto stalled = answer;
  stalled.stall_report = "stalled: ...";
  EXPECT_TRUE(merge_heard(known, {{"p", stalled}}, {}));
  EXPECT_FALSE(merge_heard(known, {{"p", stalled}}, {}));
  EXPECT_TRUE(merge_heard(known, {{"p", answer}}, {}));
  // Misses: news when the pod falls silent, and when it answers again.
  for (int miss = 1; miss < kSilentAfterMissed; ++miss)
    EXPECT_FALSE(merge_heard(known, {}, {{"p", "u1"}}));
  EXPECT_TRUE(merge_heard(known, {}, {{"p", "u1"}}));
  EXPECT_FALSE(merge_heard(known, {}, {{"p", "u1"}}));
  EXPECT_EQ(known.at("p").missed_scrapes, kSilentAfterMissed + 1);
  EXPECT_TRUE(merge_heard(known, {{"p", answer}}, {}));
  EXPECT_EQ(known.at("p").missed_scrapes, 0);
  // A round with news among the answers counts its misses all the same.
  known.at("p").missed_scrapes = kSilentAfterMissed - 1;
  PodLiveness other = answer;
  other.uid = "u2";
  EXPECT_TRUE(merge_heard(known, {{"r", other}}, {{"p", "u1"}}));
  EXPECT_EQ(known.at("p").missed_scrapes, kSilentAfterMissed);
  // A pod missed before it ever answered: a record of its misses, news once it is silent.
  EXPECT_FALSE(merge_heard(known, {}, {{"q", "u3"}}));
  EXPECT_FALSE(known.at("q").answered_at.has_value());
  for (int miss = 2; miss < kSilentAfterMissed; ++miss) {
    EXPECT_FALSE(merge_heard(known, {}, {{"q", "u3"}}));
  }
  EXPECT_TRUE(merge_heard(known, {}, {{"q", "u3"}}));
  EXPECT_EQ(known.at("q").missed_scrapes, kSilentAfterMissed);
  // A pod made again under the name starts its count anew.
  EXPECT_FALSE(merge_heard(known, {}, {{"q", "u4"}}));
  EXPECT_EQ(known.at("q").uid, "u4");
  EXPECT_EQ(known.at("q").missed_scrapes, 1);
}

}  // namespace
}  // namespace cifar::op::stall_test
