// An elastic job's reconcile (cifartrainjob/elastic.h): its rendezvous store made and kept, a
// scale-up's workers created, a scale-down's highest workers retired uncharged, its pods on a lost
// node replaced at once, the store gone with the job, and status.workers. Pure, fixed clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/reconcile.h"
#include "tests/operator/fixtures.h"

namespace cifar::op::elastic_test {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using testing::kT0;

// An elastic all-reduce job of `replicas` workers (1 to 3) on a checkpoint volume.
Job elastic_job(int replicas, const json& run_policy = json::object()) {
  json spec = json::parse(R"({"image": "i", "model": {"name": "resnet20"},
    "dataset": {"name": "cifar10"}, "strategy": {"type": "AllReduce"},
    "checkpoint": {"volume": {"claimName": "checkpoints"}}})");
  spec["replicaSpecs"]["Worker"] = {{"replicas", replicas}, {"minReplicas", 1}, {"maxReplicas", 3}};
  spec["runPolicy"] = run_policy;
  return Job{"j", "ns", "uid", parse_spec(spec), ""};
}

json ready(json pod) {
  pod["status"]["conditions"] = json::array({{{"type", "Ready"}, {"status", "True"}}});
  return pod;
}

// `workers` workers and the store, running and ready, worker i on node "a" if even, else "b".
Observed running(const Job& job, int workers) {
  auto o = testing::no_pods();
  for (int i = 0; i < workers; ++i) {
    auto pod = desired_pod(job, Role::kWorker, i);
    pod["spec"]["nodeName"] = i % 2 == 0 ? "a" : "b";
    o.pods.push_back(ready(testing::running_pod(pod, kT0)));
  }
  auto store = desired_rendezvous_store(job);
  store["spec"]["nodeName"] = "b";
  o.pods.push_back(testing::running_pod(store, kT0));
  return o;
}

std::vector<std::string> names(const std::vector<json>& pods) {
  std::vector<std::string> out;
  out.reserve(pods.size());
  for (const auto& p : pods) out.push_back(p["metadata"]["name"]);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ElasticJob, ItsFirstRoundCreatesItsWorkersAndItsRendezvousStore) {
  const auto job = elastic_job(2);
  const auto plan = reconcile(job, JobStatus{}, testing::no_pods(), kT0);
  EXPECT_EQ(names(plan.create_pods),
            (std::vector<std::string>{"j-rendezvous", "j-worker-0", "j-worker-1"}));
}

TEST(ElasticJob, AScaleUpCreatesTheNewWorkersAndRestartsNothing) {
  const auto plan =
      reconcile(elastic_job(3), testing::running_since(kT0), running(elastic_job(2), 2), kT0);
  EXPECT_EQ(names(plan.create_pods), std::vector<std::string>{"j-worker-2"});
  EXPECT_TRUE(plan.delete_pods.empty());
  EXPECT_EQ(plan.status.state, ConditionType::kRunning);
  ASSERT_TRUE(plan.status.workers);
  EXPECT_EQ(plan.status.workers->training, 2);
  EXPECT_EQ(plan.status.workers->desired, 3);
  EXPECT_EQ(plan.status.workers->reason, "Joining");
  EXPECT_EQ(plan.status.workers->selector,
            "cifartrain.io/job-name=j,cifartrain.io/replica-type=worker");
}

TEST(ElasticJob, AScaleDownRetiresTheHighestWorkersUncharged) {
  const auto plan =
      reconcile(elastic_job(1), testing::running_since(kT0), running(elastic_job(3), 3), kT0);
  auto deleted = plan.delete_pods;
  std::sort(deleted.begin(), deleted.end());
  EXPECT_EQ(deleted, (std::vector<std::string>{"j-worker-1", "j-worker-2"}));
  EXPECT_TRUE(plan.create_pods.empty());
  EXPECT_EQ(plan.restarts, 0);
  EXPECT_EQ(plan.status.state, ConditionType::kRunning);  // not Restarting: nothing failed
  int leaving = 0;
  for (const auto& e : plan.events) {
    if (e.reason == reason::kWorkerLeaving) ++leaving;
  }
  EXPECT_EQ(leaving, 2);
  ASSERT_TRUE(plan.status.workers);
  EXPECT_EQ(plan.status.workers->reason, "Leaving");  // 3 ready until they are gone
}

TEST(ElasticJob, ItsStoreIsRecreatedWhenItFailedAndItsRestartsAreNeverCharged) {
  const auto job = elastic_job(2);
  auto observed = running(job, 2);
  auto& store = testing::pod_named(observed, "j-rendezvous");
  store["status"]["containerStatuses"][0]["restartCount"] = 7;
  auto plan = reconcile(job, testing::running_since(kT0), observed, kT0);
  EXPECT_EQ(plan.restarts, 0);
  EXPECT_TRUE(plan.delete_pods.empty());
  store["status"]["phase"] = "Failed";  // evicted
  plan = reconcile(job, testing::running_since(kT0), observed, kT0);
  EXPECT_EQ(plan.delete_pods, std::vector<std::string>{"j-rendezvous"});
  EXPECT_EQ(plan.restarts, 0);
  // Once it is gone, made again.
  observed.pods.erase(std::remove_if(observed.pods.begin(), observed.pods.end(),
                                     [](const json& p) { return is_rendezvous_store(p); }),
                      observed.pods.end());
  plan = reconcile(job, testing::running_since(kT0), observed, kT0);
  EXPECT_EQ(names(plan.create_pods), std::vector<std::string>{"j-rendezvous"});
}

TEST(ElasticJob, ItsPodsOnALostNodeAreReplacedWithoutTheGrace) {
  const auto job = elastic_job(2, json{{"nodeFailureGraceSeconds", 30}});
  auto observed = running(job, 2);
  NodeTrouble trouble;
  trouble.reason = "NodeStatusUnknown";
  trouble.since = to_time(kT0);
  trouble.unreachable = true;
  observed.troubled_nodes["b"] = trouble;
  const auto plan = reconcile(job, testing::running_since(kT0), observed, kT0 + seconds(1));
  auto deleted = plan.force_delete_pods;
  std::sort(deleted.begin(), deleted.end());
  EXPECT_EQ(deleted, (std::vector<std::string>{"j-rendezvous", "j-worker-1"}));
}

TEST(ElasticJob, ItsStoreGoesWithTheJobWhateverCleanPodPolicyKeeps) {
  const auto job = elastic_job(1, json{{"cleanPodPolicy", "None"}});
  auto observed = running(job, 1);
  auto& chief = testing::pod_named(observed, "j-worker-0");
  chief["status"]["phase"] = "Succeeded";
  chief["status"]["containerStatuses"][0]["state"] = {
      {"terminated", {{"exitCode", 0}, {"finishedAt", format_time(kT0 + seconds(60))}}}};
  const auto plan = reconcile(job, testing::running_since(kT0), observed, kT0 + seconds(61));
  EXPECT_EQ(plan.delete_pods, std::vector<std::string>{"j-rendezvous"});
}

// status.progress with the world of workers `workers` (progress.h) at `step`.
JobStatus training_in_world(const std::vector<int>& workers, int64_t round, int64_t step) {
  auto status = testing::running_since(kT0);
  status.progress = {
      {"step", step},
      {"world",
       {{"round", round}, {"size", static_cast<int>(workers.size())}, {"workers", workers}}}};
  return status;
}

std::vector<std::string> world_events(const Plan& plan) {
  std::vector<std::string> messages;
  for (const auto& e : plan.events) {
    if (e.reason == reason::kWorldChanged) messages.push_back(e.message);
  }
  return messages;
}

// The scraper's news: a new world. An Event says who joined and who left, why, at which step and
// how many train now; status.workers counts the world, not the ready pods.
TEST(ElasticJob, AWorldChangeIsAnEventNamingWhoJoinedAndWhoLeftAndWhy) {
  const auto job = elastic_job(3);
  auto observed = running(job, 3);
  observed.progress = training_in_world({0, 1, 2}, 4, 812).progress;
  auto plan = reconcile(job, training_in_world({0, 1}, 3, 800), observed, kT0);
  EXPECT_EQ(world_events(plan),
            std::vector<std::string>{"j-worker-2 joined at step 812: 3 trainers"});
  ASSERT_TRUE(plan.status.workers);
  EXPECT_EQ(plan.status.workers->training, 3);
  EXPECT_EQ(plan.status.workers->reason, "");

  // A node lost with worker 1 (replaced: status.nodeLoss), and a scale-down of worker 2, seen in
  // one scrape.
  auto status = training_in_world({0, 1, 2}, 4, 900);
  status.node_loss = NodeLoss{"b", {"j-worker-1"}, 900, to_time(kT0)};
  observed = running(elastic_job(2), 1);
  observed.progress = training_in_world({0}, 5, 903).progress;
  plan = reconcile(elastic_job(2), status, observed, kT0);
  EXPECT_EQ(world_events(plan),
            std::vector<std::string>{"j-worker-1 left (its node b was lost), j-worker-2 left "
                                     "(the job was scaled down) at step 903: 1 trainer"});
  ASSERT_TRUE(plan.status.workers);
  EXPECT_EQ(plan.status.workers->training, 1);
  EXPECT_EQ(plan.status.workers->reason, "Joining");  // 1 of 2: worker 1's replacement comes

  // The same workers in a new round (a store restarted): no news.
  observed = running(job, 3);
  observed.progress = training_in_world({0, 1, 2}, 0, 950).progress;
  plan = reconcile(job, training_in_world({0, 1, 2}, 9, 940), observed, kT0);
  EXPECT_TRUE(world_events(plan).empty());
}

bool has_event(const Plan& plan, std::string_view reason) {
  return std::any_of(plan.events.begin(), plan.events.end(),
                     [&](const EventRecord& e) { return e.reason == reason; });
}

TEST(ElasticJob, FewerWorkersRunningThanItsMinimumIsSaidOnce) {
  auto job = elastic_job(3);
  job.spec.replicas.at(Role::kWorker).min_replicas = 2;
  // Workers 1 and 2 lost with their node (their pods gone): worker 0 waits alone.
  auto observed = running(job, 1);
  const auto status = training_in_world({0, 1, 2}, 4, 900);
  auto plan = reconcile(job, status, observed, kT0);
  ASSERT_TRUE(plan.status.workers);
  EXPECT_EQ(plan.status.workers->reason, reason::kBelowMinimum);
  EXPECT_NE(plan.status.workers->message.find(
                "1 worker is running, fewer than minReplicas 2: training stops until "
                "replacements join"),
            std::string::npos)
      << plan.status.workers->message;
  EXPECT_TRUE(has_event(plan, reason::kBelowMinimum));
  // Said once as it starts.
  const auto again = reconcile(job, plan.status, observed, kT0 + seconds(5));
  EXPECT_EQ(again.status.workers->reason, reason::kBelowMinimum);
  EXPECT_FALSE(has_event(again, reason::kBelowMinimum));
  // Two running again: not below.
  const auto back = reconcile(job, plan.status, running(job, 2), kT0 + seconds(30));
  EXPECT_NE(back.status.workers->reason, reason::kBelowMinimum);
  // Before the job first trained (no world yet) its starting workers are no news.
  const auto starting = reconcile(job, JobStatus{}, testing::no_pods(), kT0);
  EXPECT_NE(starting.status.workers->reason, reason::kBelowMinimum);
}

// An elastic parameter-server job: no rendezvous store (its trainers meet at the PS), TF_CONFIG
// lists the most workers there can be, and every trainer is told the fewest (the master counts).
TEST(ElasticJob, OfParameterServersHasNoStoreListsItsMostWorkersAndTellsTheFewest) {
  json spec = json::parse(R"({"image": "i", "model": {"name": "resnet20"},
    "dataset": {"name": "cifar10"}, "strategy": {"type": "ParameterServer"},
    "checkpoint": {"volume": {"claimName": "checkpoints"}},
    "replicaSpecs": {"PS": {"replicas": 1}, "Master": {"replicas": 1},
                     "Worker": {"replicas": 2, "minReplicas": 1, "maxReplicas": 3}}})");
  const Job job{"j", "ns", "uid", parse_spec(spec), ""};
  const auto plan = reconcile(job, JobStatus{}, testing::no_pods(), kT0);
  EXPECT_EQ(names(plan.create_pods),
            (std::vector<std::string>{"j-master-0", "j-ps-0", "j-worker-0", "j-worker-1"}));
  for (const auto& pod : plan.create_pods) {
    const auto args = pod["spec"]["containers"][0]["args"].get<std::vector<std::string>>();
    const auto at = std::find(args.begin(), args.end(), "--min-trainers");
    const auto name = pod["metadata"]["name"].get<std::string>();
    if (name == "j-ps-0") {
      EXPECT_EQ(at, args.end()) << name;
      continue;
    }
    ASSERT_NE(at, args.end()) << name;
    EXPECT_EQ(*std::next(at), "2") << name;
    const auto tf_config = json::parse(testing::env_of(pod, "TF_CONFIG"));
    EXPECT_EQ(tf_config["cluster"]["worker"].size(), 3U) << name;
    EXPECT_EQ(testing::env_of(pod, "MASTER_ADDR"), "") << name;
  }
  // A master is in every update: an elastic parameter-server job without one is refused.
  spec["replicaSpecs"].erase("Master");
  EXPECT_THROW(parse_spec(spec), InvalidSpec);
}

TEST(FixedJob, HasNoRendezvousStoreAndItsWorkersCounted) {
  json spec = json::parse(R"({"image": "i", "model": {"name": "resnet20"},
    "dataset": {"name": "cifar10"}, "strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 2}}})");
  const Job job{"j", "ns", "uid", parse_spec(spec), ""};
  const auto plan = reconcile(job, JobStatus{}, testing::no_pods(), kT0);
  EXPECT_EQ(names(plan.create_pods), (std::vector<std::string>{"j-worker-0", "j-worker-1"}));
  ASSERT_TRUE(plan.status.workers);
  EXPECT_EQ(plan.status.workers->training, 0);
  EXPECT_EQ(plan.status.workers->desired, 2);
}

}  // namespace
}  // namespace cifar::op::elastic_test
