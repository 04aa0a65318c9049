// A node that dies under a job (cifartrainjob/reconcile.h): what a Node's status says
// (framework/node_status.h), a pod on a node that stopped answering reported and then replaced
// after runPolicy.nodeFailureGraceSeconds (at once on a node out of service) without counting
// against backoffLimit, and the pods' spread over nodes (spreadAcrossNodes). Pure, fixed clock.
#include <gtest/gtest.h>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/reconcile.h"
#include "contract/labels.h"
#include "framework/node_status.h"
#include "tests/operator/fixtures.h"

namespace cifar::op::node_failure_test {
namespace {

using nlohmann::json;
using std::chrono::seconds;

using testing::kT0;

Job make_job(const json& run_policy = json::object()) {
  json spec = json::parse(R"({"image": "i", "model": {"name": "resnet20"},
    "dataset": {"name": "cifar10"}, "strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 2}},
    "checkpoint": {"volume": {"claimName": "checkpoints"}}})");
  spec["runPolicy"] = run_policy;
  return Job{"j", "ns", "uid", parse_spec(spec), ""};
}

// Both workers running, worker 0 on node "a" and worker 1 on node "b".
Observed running(const Job& job) {
  auto o = testing::no_pods();
  int i = 0;
  for (auto p : desired_pods(job)) {
    p["metadata"]["uid"] = "uid-" + std::to_string(i);
    p["spec"]["nodeName"] = i++ == 0 ? "a" : "b";
    o.pods.push_back(testing::running_pod(p, kT0));
  }
  return o;
}

NodeTrouble unreachable_since(Clock::time_point t) {
  NodeTrouble trouble;
  trouble.reason = "NodeStatusUnknown";
  trouble.message = "Kubelet stopped posting node status.";
  trouble.since = to_time(t);
  trouble.unreachable = true;
  return trouble;
}

json node_with(const std::string& ready, const json& taints = json::array()) {
  return {{"metadata", {{"name", "b"}, {"resourceVersion", "7"}}},
          {"spec", {{"taints", taints}}},
          {"status",
           {{"capacity", {{"cpu", "2"}}},
            {"conditions",
             {{{"type", "MemoryPressure"}, {"status", "False"}},
              {{"type", "Ready"},
               {"status", ready},
               {"reason", "NodeStatusUnknown"},
               {"message", "Kubelet stopped posting node status."},
               {"lastHeartbeatTime", "2026-11-22T11:59:00Z"},
               {"lastTransitionTime", "2026-11-22T12:00:00Z"}}}}}}};
}

TEST(NodeStatus, AReadyNodeIsNoTrouble) {
  EXPECT_FALSE(node_trouble(node_with("True")));
  EXPECT_FALSE(node_trouble(json{{"metadata", {{"name", "new"}}}}));  // nothing reported yet
}

TEST(NodeStatus, ANodeThatStoppedAnsweringIsTroubleSinceItsTransition) {
  const auto trouble = node_trouble(node_with("Unknown"));
  ASSERT_TRUE(trouble);
  EXPECT_EQ(trouble->reason, "NodeStatusUnknown");
  EXPECT_EQ(trouble->since, to_time(kT0));
  EXPECT_FALSE(trouble->out_of_service);
  EXPECT_TRUE(trouble->lost());
  // A kubelet that answers "not ready" is trouble, but not lost: it can still end its pods.
  const auto not_ready = node_trouble(node_with("False"));
  ASSERT_TRUE(not_ready);
  EXPECT_FALSE(not_ready->lost());
}

TEST(NodeStatus, TheOutOfServiceTaintMarksANodeGone) {
  const auto trouble = node_trouble(
      node_with("True", json::array({{{"key", kOutOfServiceTaint}, {"effect", "NoExecute"}}})));
  ASSERT_TRUE(trouble);
  EXPECT_TRUE(trouble->out_of_service);
  EXPECT_TRUE(trouble->lost());
  EXPECT_EQ(trouble->reason, "OutOfService");
}

TEST(NodeStatus, TrimmingKeepsWhatTroubleReadsAndNoHeartbeat) {
  auto node = node_with("Unknown");
  const auto before = node_trouble(node);
  trim_node(node);
  EXPECT_EQ(node_trouble(node), before);
  EXPECT_FALSE(node["status"].contains("capacity"));
  ASSERT_EQ(node["status"]["conditions"].size(), 1U);
  EXPECT_FALSE(node["status"]["conditions"][0].contains("lastHeartbeatTime"));
  EXPECT_EQ(node["metadata"]["name"], "b");
}

TEST(NodeFailure, APodOnALostNodeIsReportedUntilTheGraceEnds) {
  const auto job = make_job();
  auto observed = running(job);
  observed.troubled_nodes["b"] = unreachable_since(kT0);
  const auto plan = reconcile(job, testing::running_since(kT0), observed, kT0 + seconds(12));
  EXPECT_TRUE(plan.force_delete_pods.empty());
  EXPECT_TRUE(plan.create_pods.empty());
  const auto* held = plan.status.condition(ConditionType::kPodsNotReady);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->reason, reason::kNodeLost);
  EXPECT_EQ(held->message,
            "pod j-worker-1 is on node b, not Ready since " + format_time(kT0) +
                " (NodeStatusUnknown: Kubelet stopped posting node status.); it is replaced once "
                "the node has been lost 30 s (runPolicy.nodeFailureGraceSeconds)");
  // The same words a few seconds on: a reconcile in between writes no new status.
  const auto later = reconcile(job, testing::running_since(kT0), observed, kT0 + seconds(15));
  ASSERT_NE(later.status.condition(ConditionType::kPodsNotReady), nullptr);
  EXPECT_EQ(later.status.condition(ConditionType::kPodsNotReady)->message, held->message);
  ASSERT_TRUE(plan.requeue_after);
  EXPECT_LE(*plan.requeue_after, seconds(19));  // at the end of the grace
  EXPECT_EQ(plan.status.state, ConditionType::kRunning);
}

TEST(NodeFailure, AfterTheGraceThePodIsDeletedForGoodAndRecreatedUncounted) {
  const auto job = make_job(json{{"backoffLimit", 0}, {"nodeFailureGraceSeconds", 30}});
  auto observed = running(job);
  observed.troubled_nodes["b"] = unreachable_since(kT0);
  const auto now = kT0 + seconds(31);
  const auto plan = reconcile(job, testing::running_since(kT0), observed, now);
  EXPECT_EQ(plan.force_delete_pods, std::vector<std::string>{"j-worker-1"});
  EXPECT_TRUE(plan.delete_pods.empty());
  EXPECT_TRUE(plan.create_pods.empty());  // once the cache shows it gone
  EXPECT_EQ(plan.status.restarts, 0);     // not the job's fault: backoffLimit 0 holds
  EXPECT_EQ(plan.status.state, ConditionType::kRestarting);
  ASSERT_FALSE(plan.events.empty());
  EXPECT_EQ(plan.events.front().reason, reason::kNodeLost);
  EXPECT_NE(plan.events.front().message.find("not counted against backoffLimit"),
            std::string::npos);
  EXPECT_EQ(plan.events.size(), 1U);  // no second word of it as a pod still waiting

  // The next round: the pod is gone from the cache; it is created again, still uncounted.
  auto after = observed;
  after.pods.pop_back();
  auto status = plan.status;
  const auto next = reconcile(job, status, after, now + seconds(1));
  ASSERT_EQ(next.create_pods.size(), 1U);
  EXPECT_EQ(next.create_pods[0]["metadata"]["name"], "j-worker-1");
  EXPECT_FALSE(next.status.finished());
  EXPECT_EQ(next.status.restarts, 0);
}

// After the replacement, until the job trains again (the ranks left wait for it, a parameter
// server restores its shard): PodsNotReady, the job's REASON, stays NodeLost, saying what was
// replaced and the step the job stood at; once the chief's step moves, that is over.
TEST(NodeFailure, TheJobSaysNodeLostUntilItTrainsAgainAfterTheReplacement) {
  const auto job = make_job(json{{"nodeFailureGraceSeconds", 30}});
  auto observed = running(job);
  observed.troubled_nodes["b"] = unreachable_since(kT0);
  auto status = testing::running_since(kT0);
  status.progress = {{"step", 140}};
  const auto replaced_at = kT0 + seconds(31);
  const auto replacing = reconcile(job, status, observed, replaced_at);
  ASSERT_TRUE(replacing.status.node_loss);
  EXPECT_EQ(replacing.status.node_loss->pods, std::vector<std::string>{"j-worker-1"});
  EXPECT_EQ(replacing.status.node_loss->node, "b");
  EXPECT_EQ(replacing.status.node_loss->step, 140);

  // Its replacement runs on node a; the job stands where it stood.
  auto replaced = running(job);
  replaced.pods[1]["spec"]["nodeName"] = "a";
  replaced.pods[1]["metadata"]["uid"] = "uid-new";
  replaced.troubled_nodes["b"] = unreachable_since(kT0);
  const auto waiting = reconcile(job, replacing.status, replaced, replaced_at + seconds(12));
  const auto* held = waiting.status.condition(ConditionType::kPodsNotReady);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->status, ConditionStatus::kTrue);
  EXPECT_EQ(held->reason, reason::kNodeLost);
  EXPECT_EQ(held->message,
            "pod j-worker-1 was replaced 12 s ago, after node b was lost; the job has not trained "
            "since (step 140)");
  EXPECT_EQ(waiting.status.summary_reason, std::string(reason::kNodeLost));
  EXPECT_TRUE(waiting.requeue_after);

  // The chief's step moves: it trains again.
  auto moved = waiting.status;
  moved.progress = {{"step", 141}};
  const auto training = reconcile(job, moved, replaced, replaced_at + seconds(20));
  EXPECT_FALSE(training.status.node_loss);
  const auto* after = training.status.condition(ConditionType::kPodsNotReady);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->status, ConditionStatus::kFalse);
  EXPECT_FALSE(training.status.summary_reason);
}

TEST(NodeFailure, AStuckTerminatingPodOnALostNodeIsReplacedNotFatal) {
  const auto job = make_job(json{{"terminatingDeadlineSeconds", 10}});
  auto observed = running(job);
  observed.pods[1]["metadata"]["deletionTimestamp"] = format_time(kT0);
  observed.troubled_nodes["b"] = unreachable_since(kT0);
  const auto plan = reconcile(job, testing::running_since(kT0), observed, kT0 + seconds(61));
  EXPECT_FALSE(plan.status.finished());
  EXPECT_EQ(plan.force_delete_pods, std::vector<std::string>{"j-worker-1"});
}

TEST(NodeFailure, ANodeOutOfServiceHasItsPodsReplacedAtOnce) {
  const auto job = make_job();
  auto observed = running(job);
  auto trouble = unreachable_since(kT0);
  trouble.out_of_service = true;
  observed.troubled_nodes["b"] = trouble;
  const auto plan = reconcile(job, testing::running_since(kT0), observed, kT0 + seconds(1));
  EXPECT_EQ(plan.force_delete_pods, std::vector<std::string>{"j-worker-1"});
}

TEST(NodeFailure, ASucceededPodOnALostNodeStays) {
  const auto job = make_job();
  auto observed = running(job);
  observed.pods[1]["status"]["phase"] = "Succeeded";
  observed.troubled_nodes["b"] = unreachable_since(kT0);
  const auto plan = reconcile(job, testing::running_since(kT0), observed, kT0 + seconds(600));
  EXPECT_TRUE(plan.force_delete_pods.empty());
}

TEST(NodeFailure, APodOnANodeThatSaysItIsNotReadyIsReportedNotReplaced) {
  const auto job = make_job();
  auto observed = running(job);
  auto trouble = unreachable_since(kT0);
  trouble.unreachable = false;  // Ready False: the kubelet answers
  trouble.reason = "KubeletNotReady";
  observed.troubled_nodes["b"] = trouble;
  const auto plan = reconcile(job, testing::running_since(kT0), observed, kT0 + seconds(600));
  EXPECT_TRUE(plan.force_delete_pods.empty());
  const auto* held = plan.status.condition(ConditionType::kPodsNotReady);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->reason, reason::kNodeLost);
  EXPECT_NE(held->message.find("replaced if the node stops answering"), std::string::npos)
      << held->message;
}

TEST(NodeFailure, TheRoundInWhichTheChiefSucceedsReplacesNothing) {
  const auto job = make_job();
  auto observed = running(job);
  observed.pods[0]["status"]["phase"] = "Succeeded";  // worker 0, the chief, on node a
  observed.troubled_nodes["b"] = unreachable_since(kT0);
  const auto plan = reconcile(job, testing::running_since(kT0), observed, kT0 + seconds(600));
  EXPECT_EQ(plan.status.state, ConditionType::kSucceeded);
  EXPECT_TRUE(plan.force_delete_pods.empty());
}

TEST(NodeSpread, PreferredByDefaultRequiredOrNoneOnRequest) {
  const auto spread_of = [](const json& scheduling) {
    const auto job = make_job(json{{"schedulingPolicy", scheduling}});
    return desired_pod(job, Role::kWorker, 0)["spec"].value("topologySpreadConstraints",
                                                            json::array());
  };
  const auto preferred = spread_of(json::object());
  ASSERT_EQ(preferred.size(), 1U);
  EXPECT_EQ(preferred[0]["whenUnsatisfiable"], "ScheduleAnyway");
  EXPECT_EQ(preferred[0]["topologyKey"], "kubernetes.io/hostname");
  EXPECT_EQ(preferred[0]["maxSkew"], 1);
  EXPECT_EQ(preferred[0]["nodeTaintsPolicy"], "Honor");
  EXPECT_EQ(preferred[0]["labelSelector"]["matchLabels"][contract::label::kJobName], "j");
  EXPECT_EQ(spread_of({{"spreadAcrossNodes", "Required"}})[0]["whenUnsatisfiable"],
            "DoNotSchedule");
  EXPECT_TRUE(spread_of({{"spreadAcrossNodes", "None"}}).empty());
  EXPECT_THROW(make_job(json{{"schedulingPolicy", {{"spreadAcrossNodes", "Sometimes"}}}}),
               InvalidSpec);
}

TEST(NodeSpread, APodTemplatesOwnConstraintsWin) {
  json spec = json::parse(R"({"image": "i", "model": {"name": "resnet20"},
    "dataset": {"name": "cifar10"}, "strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {
      "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "zone",
                                     "whenUnsatisfiable": "DoNotSchedule"}]}}}}})");
  const Job job{"j", "ns", "uid", parse_spec(spec), ""};
  const auto constraints = desired_pod(job, Role::kWorker, 1)["spec"]["topologySpreadConstraints"];
  ASSERT_EQ(constraints.size(), 1U);
  EXPECT_EQ(constraints[0]["topologyKey"], "zone");
}

}  // namespace
}  // namespace cifar::op::node_failure_test
