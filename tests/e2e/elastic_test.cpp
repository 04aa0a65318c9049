// Elastic jobs on the cluster (docs/ARCHITECTURE.md, "Elastic jobs"): an all-reduce job whose
// Worker.minReplicas and maxReplicas let `kubectl scale` grow and shrink it while it trains. The
// workers meet at the job's rendezvous store pod; one added joins at a step boundary, ones removed
// leave at one, and the others go on without restarting: every epoch is recorded once.
#include <gtest/gtest.h>

#include <string>

#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

class Elastic : public Cluster {
 protected:
  std::string logs(const std::string& pod_name) {
    return kubectl({"logs", pod_name, "-n", ns_}).output;
  }
  // Whether `pod_name` trains in a round of `world` ranks (its log's "rank R of N: gloo").
  bool trains_in_a_world_of(const std::string& pod_name, int world) {
    return logs(pod_name).find(" of " + std::to_string(world) + ": gloo process group") !=
           std::string::npos;
  }
  std::string uid(const std::string& pod_name) { return pod(pod_name)["metadata"]["uid"]; }
  // The messages of the namespace's Events of `reason`, space-separated.
  std::string events(const std::string& reason) {
    return kubectl({"get", "events", "-n", ns_, "--field-selector", "reason=" + reason, "-o",
                    "jsonpath={.items[*].message}"})
        .output;
  }
  // status.progress.world.workers: the workers of the group that trains now, as the operator
  // scraped them.
  json world_workers(const std::string& job) {
    return status_of(job)
        .value("progress", json::object())
        .value("world", json::object())
        .value("workers", json());
  }
  int scale(const std::string& job, int replicas) {
    const auto scaled = kubectl(
        {"scale", "cifartrainjob/" + job, "-n", ns_, "--replicas=" + std::to_string(replicas)});
    EXPECT_EQ(scaled.exit_code, 0) << scaled.output;
    return scaled.exit_code;
  }
};

// Enough epochs of the slice (16 steps each, a global batch of 3 x 32) for two resizes mid-run.
constexpr int kEpochsAcrossTwoResizes = 10;

TEST_F(Elastic, KubectlScaleGrowsAndShrinksARunningAllReduceJobWithNoRestart) {
  data_and_checkpoint_volumes();
  checkpoint_every_steps_ = 8;
  submit("grow", kAllReduce, "    Worker: {replicas: 2, minReplicas: 1, maxReplicas: 3}\n", "",
         "cifar10", kEpochsAcrossTwoResizes);
  ASSERT_TRUE(wait_until_training("grow")) << diagnose("grow");
  EXPECT_TRUE(pod_exists("grow-rendezvous"));
  const auto first = uid("grow-worker-0");
  EXPECT_EQ(status_of("grow").value("workers", json::object()).value("summary", ""), "2/2");

  // Up to 3: a third worker, created, joins the two at a step boundary.
  ASSERT_EQ(scale("grow", 3), 0);
  EXPECT_TRUE(wait_for([&] { return trains_in_a_world_of("grow-worker-2", 3); }, seconds(120)))
      << logs("grow-worker-2") << diagnose("grow");
  // The operator learns the world from the workers' metrics: the workers column counts it, and
  // an Event names who joined.
  EXPECT_TRUE(wait_for(
      [&] {
        return status_of("grow").value("workers", json::object()).value("summary", "") == "3/3";
      },
      seconds(30)))
      << status_of("grow").dump();
  EXPECT_TRUE(wait_for(
      [&] {
        return world_workers("grow") == json{0, 1, 2};
      },
      seconds(30)))
      << status_of("grow").dump();
  EXPECT_TRUE(wait_for(
      [&] {
        return events("WorldChanged").find("grow-worker-2 joined at step ") != std::string::npos;
      },
      seconds(30)))
      << events("WorldChanged");

  // Down to 1: the two highest leave at a step boundary, worker 0 trains on alone.
  ASSERT_EQ(scale("grow", 1), 0);
  EXPECT_TRUE(wait_for([&] { return !pod_exists("grow-worker-1") && !pod_exists("grow-worker-2"); },
                       seconds(90)))
      << diagnose("grow");
  // Within a round or two, not the collective timeout (60 s): a leaving worker whose SIGTERM came
  // as it joined the next round (two leave at once) leaves that round too (rendezvous.h).
  EXPECT_TRUE(wait_for([&] { return trains_in_a_world_of("grow-worker-0", 1); }, seconds(60)))
      << logs("grow-worker-0");
  const auto leaving = events("WorkerLeaving");
  EXPECT_NE(leaving.find("worker grow-worker-2 leaves"), std::string::npos) << leaving;
  EXPECT_NE(leaving.find("worker grow-worker-1 leaves"), std::string::npos) << leaving;
  // In one world change or two, each leaver named with why.
  EXPECT_TRUE(wait_for([&] { return world_workers("grow") == json{0}; }, seconds(30)))
      << status_of("grow").dump();
  EXPECT_TRUE(wait_for(
      [&] {
        const auto changes = events("WorldChanged");
        return changes.find("grow-worker-1 left (the job was scaled down)") != std::string::npos &&
               changes.find("grow-worker-2 left (the job was scaled down)") != std::string::npos;
      },
      seconds(30)))
      << events("WorldChanged");

  ASSERT_TRUE(wait_for_state("grow", "Succeeded", seconds(600))) << diagnose("grow");
  // Worker 0 trained through both resizes in one container: never recreated or restarted.
  EXPECT_EQ(uid("grow-worker-0"), first);
  EXPECT_EQ(restart_count("grow-worker-0"), 0);
  EXPECT_EQ(status_of("grow").value("restarts", -1), 0) << status_of("grow").dump();
  EXPECT_EQ(recorded_epochs(run_dir("grow")), every_epoch_once(kEpochsAcrossTwoResizes));
  // The store goes with the job (whatever cleanPodPolicy keeps).
  EXPECT_TRUE(wait_for([&] { return !pod_exists("grow-rendezvous"); }, seconds(60)));
}

}  // namespace
}  // namespace cifar::e2e
