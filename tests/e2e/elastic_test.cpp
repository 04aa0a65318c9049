// Elastic jobs on the cluster (docs/ARCHITECTURE.md, "Elastic jobs"): an all-reduce job whose
// Worker.minReplicas and maxReplicas let `kubectl scale` and a HorizontalPodAutoscaler grow and
// shrink it while it trains, and a sync parameter-server job that `kubectl scale` grows and
// shrinks. The all-reduce workers meet at the job's rendezvous store pod, the parameter-server
// trainers at PS 0, which plans each update; one added joins at a step boundary, ones removed
// leave at one, and the others go on without restarting: every epoch is recorded once, and trains
// each sample once.
#include <gtest/gtest.h>

#include <iostream>
#include <sstream>
#include <string>

#include "framework/clock.h"
#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

class Elastic : public Cluster {
 protected:
  // Seconds from `pod_name`'s container start to its log's first line that says `said` after one
  // that says `after` (to the second: the API's startedAt is whole seconds); -1 if none.
  int64_t seconds_from_start_to(const std::string& pod_name, const std::string& after,
                                const std::string& said) {
    const auto started = pod(pod_name)["status"]["containerStatuses"][0]["state"]["running"].value(
        "startedAt", std::string());
    std::istringstream lines(kubectl({"logs", pod_name, "-n", ns_, "--timestamps"}).output);
    bool seen = false;
    for (std::string line; std::getline(lines, line);) {
      seen = seen || line.find(after) != std::string::npos;
      if (!seen || line.find(said) == std::string::npos || started.empty()) continue;
      // "2026-12-01T08:16:04.123456789Z ..." to the second.
      return (op::parse_time(line.substr(0, 19) + "Z") - op::parse_time(started)).count();
    }
    return -1;
  }
};

// Enough epochs of the slice (15 steps each, a global batch of 4 x 25 that divides its 1500
// samples, so that an epoch trains each once) for two resizes mid-run.
constexpr int kEpochsAcrossTwoResizes = 10;

TEST_F(Elastic, KubectlScaleAndAnHpaGrowAndShrinkARunningAllReduceJobWithNoRestart) {
  // cleanPodPolicy None: workers 0 and 1 are read after the job ended (rank 1 may still be
  // finishing at the chief's success, and the default, Running, deletes it then: a CI run met it).
  submit_elastic("grow", kAllReduce, "    Worker: {replicas: 2, minReplicas: 1, maxReplicas: 4}\n",
                 "  runPolicy: {cleanPodPolicy: None}\n", kEpochsAcrossTwoResizes);
  ASSERT_TRUE(wait_until_training("grow")) << diagnose("grow");
  EXPECT_TRUE(pod_exists("grow-rendezvous"));
  const auto first = std::vector<std::string>{uid("grow-worker-0"), uid("grow-worker-1")};
  EXPECT_EQ(status_of("grow").value("workers", json::object()).value("summary", ""), "2/2");

  // Up to 4: two workers, created, join the two at a step boundary, handed the state from memory.
  ASSERT_EQ(scale("grow", 4), 0);
  for (const auto* name : {"grow-worker-2", "grow-worker-3"}) {
    EXPECT_TRUE(wait_for([&] { return trains_in_a_world_of(name, 4); }, seconds(120)))
        << logs(name) << diagnose("grow");
  }
  // How long a new worker took from its container's start to its first step (the model line
  // comes right before it), recorded in docs/BENCHMARKS.md; the issue asks for <= 10 s.
  for (const auto* name : {"grow-worker-2", "grow-worker-3"}) {
    int64_t first_step = -1;
    EXPECT_TRUE(wait_for(
        [&] {
          first_step =
              seconds_from_start_to(name, " of 4: gloo process group", "trainable parameters");
          return first_step >= 0;
        },
        seconds(60)))
        << logs(name);
    std::cout << name << ": first step in a group of 4 " << first_step
              << " s after its container started\n";
    EXPECT_NE(logs(name).find("memory (no checkpoint read)"), std::string::npos) << logs(name);
  }
  // The operator learns the world from the workers' metrics: the workers column counts it, and
  // Events name who joined.
  EXPECT_TRUE(world_becomes("grow", json{0, 1, 2, 3}, seconds(30), "4/4"))
      << status_of("grow").dump();
  EXPECT_TRUE(events_say("WorldChanged", {"grow-worker-2 joined", "grow-worker-3 joined"}))
      << events("WorldChanged");

  // Down to 2, by a HorizontalPodAutoscaler through the job's scale subresource: one whose
  // maxReplicas is 2 brings a job of 4 down at its next sync (15 s), with no metric needed (the
  // controller's rule for a target above its range: this cluster serves no metrics API). The two
  // highest leave at a step boundary (at once: one may get its SIGTERM as it joins the next round,
  // and leaves that round too, rendezvous.h), and the two first train on.
  apply(
      "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: grow}\n"
      "spec:\n  scaleTargetRef: {apiVersion: cifartrain.io/v1alpha1, kind: CifarTrainJob, name: "
      "grow}\n  minReplicas: 1\n  maxReplicas: 2\n  metrics:\n  - type: Resource\n"
      "    resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}\n");
  EXPECT_TRUE(wait_for(
      [&] {
        return events("SuccessfulRescale")
                   .find(
                       "New size: 2; reason: Current number of replicas "
                       "above Spec.MaxReplicas") != std::string::npos;
      },
      seconds(60)))
      << events("SuccessfulRescale") << kubectl({"describe", "hpa", "grow", "-n", ns_}).output;
  EXPECT_TRUE(wait_for([&] { return !pod_exists("grow-worker-2") && !pod_exists("grow-worker-3"); },
                       seconds(90)))
      << diagnose("grow");
  EXPECT_TRUE(world_becomes("grow", json{0, 1}, seconds(60)))
      << status_of("grow").dump() << logs("grow-worker-0");
  const auto leaving = events("WorkerLeaving");
  EXPECT_NE(leaving.find("worker grow-worker-2 leaves"), std::string::npos) << leaving;
  EXPECT_NE(leaving.find("worker grow-worker-3 leaves"), std::string::npos) << leaving;
  EXPECT_TRUE(events_say("WorldChanged", {"grow-worker-2 left (the job was scaled down)",
                                          "grow-worker-3 left (the job was scaled down)"}))
      << events("WorldChanged");

  ASSERT_TRUE(wait_for_state("grow", "Succeeded", seconds(600))) << diagnose("grow");
  // Workers 0 and 1 trained through both resizes in their first containers: never recreated or
  // restarted.
  EXPECT_EQ((std::vector<std::string>{uid("grow-worker-0"), uid("grow-worker-1")}), first);
  EXPECT_EQ(restart_count("grow-worker-0"), 0);
  EXPECT_EQ(restart_count("grow-worker-1"), 0);
  EXPECT_EQ(status_of("grow").value("restarts", -1), 0) << status_of("grow").dump();
  // Each epoch, across the worlds of 2, 4 and 2 and the steps redone as they changed, recorded
  // once and trained each sample of the slice once.
  expect_every_epoch_to_train_each_sample_once("grow", kEpochsAcrossTwoResizes);
  // The store goes with the job (whatever cleanPodPolicy keeps).
  EXPECT_TRUE(wait_for([&] { return !pod_exists("grow-rendezvous"); }, seconds(60)));
}

// A sync parameter-server job of a master and 2 to 4 workers: 2 -> 4 -> 2 by `kubectl scale` in
// the middle of epochs. Each update's trainers are fixed by PS 0 when the update before it
// completed; a worker added is in the next update's, one removed leaves at its step boundary (the
// update it was planned in is computed again without it), and every update reads the same global
// batch (the master and 4 workers x 25), split among the trainers it has.
TEST_F(Elastic, KubectlScaleGrowsAndShrinksARunningSyncParameterServerJobWithNoRestart) {
  submit_elastic("psgrow", kPsSync,
                 "    PS: {replicas: 1}\n    Master: {replicas: 1}\n"
                 "    Worker: {replicas: 2, minReplicas: 1, maxReplicas: 4}\n",
                 "", kEpochsAcrossTwoResizes);
  const auto ps_says = [&](const std::string& what, seconds timeout) {
    return wait_for([&] { return logs("psgrow-ps-0").find(what) != std::string::npos; }, timeout);
  };
  ASSERT_TRUE(wait_until_training("psgrow")) << diagnose("psgrow");
  EXPECT_TRUE(ps_says("trainers 0, 1, 2 (3)", seconds(60))) << logs("psgrow-ps-0");
  EXPECT_FALSE(pod_exists("psgrow-rendezvous"));  // the trainers meet at PS 0
  const std::vector<std::string> stay = {"psgrow-ps-0", "psgrow-master-0", "psgrow-worker-0",
                                         "psgrow-worker-1"};
  std::vector<std::string> first;
  first.reserve(stay.size());
  for (const auto& name : stay) first.push_back(uid(name));

  ASSERT_EQ(scale("psgrow", 4), 0);
  EXPECT_TRUE(ps_says("trainers 0, 1, 2, 3, 4 (5)", seconds(120)))
      << logs("psgrow-ps-0") << diagnose("psgrow");
  for (const auto* name : {"psgrow-worker-2", "psgrow-worker-3"}) {
    int64_t first_step = -1;
    EXPECT_TRUE(wait_for(
        [&] {
          first_step = seconds_from_start_to(name, "from update", "trainable parameters");
          return first_step >= 0;
        },
        seconds(60)))
        << logs(name);
    std::cout << name << ": first step with 5 trainers " << first_step
              << " s after its container started\n";
  }
  // The operator learns the world from PS 0's metrics: the workers column counts it, and Events
  // name who joined.
  EXPECT_TRUE(world_becomes("psgrow", json{0, 1, 2, 3}, seconds(30), "4/4"))
      << status_of("psgrow").dump();
  EXPECT_TRUE(events_say("WorldChanged", {"psgrow-worker-2 joined", "psgrow-worker-3 joined"}))
      << events("WorldChanged");

  ASSERT_EQ(scale("psgrow", 2), 0);
  EXPECT_TRUE(
      wait_for([&] { return !pod_exists("psgrow-worker-2") && !pod_exists("psgrow-worker-3"); },
               seconds(90)))
      << diagnose("psgrow");
  const auto ps = logs("psgrow-ps-0");
  EXPECT_NE(ps.find("trainer 3 left"), std::string::npos) << ps;
  EXPECT_NE(ps.find("trainer 4 left"), std::string::npos) << ps;
  const auto leaving = events("WorkerLeaving");
  EXPECT_NE(leaving.find("worker psgrow-worker-2 leaves"), std::string::npos) << leaving;
  EXPECT_NE(leaving.find("worker psgrow-worker-3 leaves"), std::string::npos) << leaving;
  EXPECT_TRUE(events_say("WorldChanged", {"psgrow-worker-2 left (the job was scaled down)",
                                          "psgrow-worker-3 left (the job was scaled down)"}))
      << events("WorldChanged");
  // The workers that left are not missed: PS 0 reports the master and the two workers left.
  EXPECT_TRUE(wait_for(
      [&] {
        const auto trainers =
            status_of("psgrow").value("progress", json::object()).value("trainers", json());
        return trainers.is_object() && trainers.value("training", 0) == 3 &&
               trainers.value("missing", json::array()).empty();
      },
      seconds(30)))
      << status_of("psgrow").dump();
  // The master, the PS and workers 0 and 1 trained through both resizes in their first
  // containers: never recreated or restarted (read before the job ends: a finished job's cleanup
  // deletes the workers still winding down).
  std::vector<std::string> now;
  for (const auto& name : stay) {
    now.push_back(uid(name));
    EXPECT_EQ(restart_count(name), 0) << name;
  }
  EXPECT_EQ(now, first);

  ASSERT_TRUE(wait_for_state("psgrow", "Succeeded", seconds(600))) << diagnose("psgrow");
  EXPECT_EQ(status_of("psgrow").value("restarts", -1), 0) << status_of("psgrow").dump();
  // Each epoch, across the updates of 3, 5 and 3 trainers and those computed again as workers
  // left, recorded once and trained each sample of the slice once (the master's tally of every
  // update's samples).
  expect_every_epoch_to_train_each_sample_once("psgrow", kEpochsAcrossTwoResizes);
}

}  // namespace
}  // namespace cifar::e2e
