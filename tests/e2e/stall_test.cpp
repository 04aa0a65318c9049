// Jobs whose trainers are alive but stop making progress (cifartrainjob/stall.h), made for real on
// the local cluster: a process stopped with SIGSTOP inside its pod, so that nothing crashes and no
// timeout of the job's own ends it (the all-reduce job's collective timeout is 10 minutes). Each
// case times the detection from the freeze to condition Stalled, checks that the condition names
// the pod that stopped and what the others wait on, and that runPolicy.onStall Restart replaced
// the right pods and the job succeeded from its newest checkpoint. A failing case prints the
// job's status, Events and pods' logs.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <iostream>
#include <string>

#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

using Wall = std::chrono::steady_clock;

class Stalls : public Cluster {
 protected:
  static constexpr int kStallSeconds = 20;

  // The job's condition Stalled, or {} while it has none.
  json stalled_condition(const std::string& job) {
    for (const auto& c : status_of(job).value("conditions", json::array())) {
      if (c.value("type", "") == "Stalled") return c;
    }
    return json::object();
  }

  // Freezes `pod`'s process and times how long the operator takes to say the job is Stalled.
  double freeze_and_time_detection(const std::string& job, const std::string& pod) {
    const int pid = container_pid(pod);
    EXPECT_GT(pid, 0) << pod;
    if (pid <= 0) return -1;
    const auto frozen_at = Wall::now();
    EXPECT_EQ(::kill(pid, SIGSTOP), 0);
    const bool seen = wait_for([&] { return stalled_condition(job).value("status", "") == "True"; },
                               seconds(180));
    EXPECT_TRUE(seen) << diagnose(job);
    return std::chrono::duration<double>(Wall::now() - frozen_at).count();
  }

  std::string stall_events(const std::string& job) {
    return kubectl({"get", "events", "-n", ns_, "--field-selector",
                    "involvedObject.name=" + job + ",reason=TrainersStalled", "-o",
                    "jsonpath={range .items[*]}{.type}: {.message}{\"\\n\"}{end}"})
        .output;
  }
};

// Rank 1 of a 2-rank all-reduce job stopped mid-run, its collective timeout 600 s: only the stall
// rule sees it. Rank 0 reports itself stalled in the gradient all-reduce; rank 1 stops answering;
// the group is replaced and resumes from the newest checkpoint.
TEST_F(Stalls, ARankFrozenUnderALongCollectiveTimeoutIsDetectedAndTheGroupReplaced) {
  data_and_checkpoint_volumes();
  submit("frozen",
         "  strategy: {type: AllReduce, allReduce: {backend: gloo, timeoutSeconds: 600}}\n",
         "    Worker: {replicas: 2}\n",
         "  runPolicy: {stallTimeoutSeconds: " + std::to_string(kStallSeconds) +
             ", onStall: Restart}\n",
         "cifar10", kLongEnoughToInterrupt);
  ASSERT_TRUE(wait_until_training("frozen")) << diagnose("frozen");
  const auto dir = run_dir("frozen");
  ASSERT_TRUE(wait_for_checkpoint(dir)) << diagnose("frozen");
  ASSERT_EQ(stalled_condition("frozen"), json::object()) << "stalled before the fault";
  const double detected = freeze_and_time_detection("frozen", "frozen-worker-1");
  const auto newest = newest_checkpoint_step(dir);
  const auto message = stalled_condition("frozen").value("message", "");
  // Frozen after the scraper heard it, or before (its metrics come up ~2 s into the run).
  EXPECT_TRUE(message.find("frozen-worker-1 at step") != std::string::npos ||
              message.find("frozen-worker-1 [never answered in") != std::string::npos)
      << message;
  EXPECT_TRUE(message.find("[stopped answering") != std::string::npos ||
              message.find("[never answered in") != std::string::npos)
      << message;
  EXPECT_NE(message.find("frozen-worker-0 at step"), std::string::npos) << message;
  EXPECT_NE(message.find("waiting on gradient all-reduce"), std::string::npos) << message;
  ASSERT_TRUE(wait_for(
      [&] {
        return stall_events("frozen").find("replacing frozen-worker-0, frozen-worker-1") !=
               std::string::npos;
      },
      seconds(60)))
      << stall_events("frozen") << diagnose("frozen");
  ASSERT_TRUE(wait_for_state("frozen", "Succeeded", seconds(400))) << diagnose("frozen");
  EXPECT_GE(status_of("frozen").value("restarts", 0), 1);
  const auto resumed =
      number_after(kubectl({"logs", "frozen-worker-0", "-n", ns_}).output, "resumed at step ", "");
  EXPECT_GE(resumed, static_cast<double>(newest)) << "resumed before the newest checkpoint";
  std::cerr << "stall | rank 1 of a 2-rank all-reduce job SIGSTOPped, stallTimeoutSeconds "
            << kStallSeconds << ", progress scraped every 5 s | Stalled after " << detected
            << " s | group replaced, resumed at step " << resumed << " (newest checkpoint "
            << newest << ")\n";
  EXPECT_LE(detected, kStallSeconds + 2 * 5 + 15) << "later than the limit and a scrape or two";
}

// The parameter server of a synchronous PS job stopped mid-run: both trainers report themselves
// stalled in their PS calls, the PS stops answering, and the PS alone is replaced (from the
// newest checkpoint), after which the trainers go on with it.
TEST_F(Stalls, AFrozenParameterServerIsDetectedAndReplacedAloneAndTheJobSucceeds) {
  data_and_checkpoint_volumes();
  submit("psfrozen", kPsSync,
         "    PS: {replicas: 1}\n    Master: {replicas: 1}\n    Worker: {replicas: 1}\n",
         // Room for the trainers' own retries around the PS's replacement.
         "  runPolicy: {stallTimeoutSeconds: " + std::to_string(kStallSeconds) +
             ", onStall: Restart, backoffLimit: 6}\n",
         "cifar10", kLongEnoughToInterrupt);
  ASSERT_TRUE(wait_until_training("psfrozen")) << diagnose("psfrozen");
  const auto dir = run_dir("psfrozen");
  ASSERT_TRUE(wait_for_checkpoint(dir)) << diagnose("psfrozen");
  const double detected = freeze_and_time_detection("psfrozen", "psfrozen-ps-0");
  const auto message = stalled_condition("psfrozen").value("message", "");
  // The trainers' reports name the frozen PS: a call (push or pull) to one of its stripes.
  EXPECT_NE(message.find("with PS shard "), std::string::npos) << message;
  EXPECT_NE(message.find("(psfrozen-ps-0."), std::string::npos) << message;
  EXPECT_NE(message.find("psfrozen-ps-0 stopped answering"), std::string::npos) << message;
  ASSERT_TRUE(wait_for(
      [&] {
        return stall_events("psfrozen").find("replacing psfrozen-ps-0 (restart") !=
               std::string::npos;
      },
      seconds(60)))
      << stall_events("psfrozen") << diagnose("psfrozen");
  ASSERT_TRUE(wait_for_state("psfrozen", "Succeeded", seconds(400))) << diagnose("psfrozen");
  std::cerr << "stall | the PS of a sync PS job SIGSTOPped, stallTimeoutSeconds " << kStallSeconds
            << ", progress scraped every 5 s | Stalled after " << detected
            << " s | PS replaced alone, job Succeeded\n";
  EXPECT_LE(detected, kStallSeconds + 3 * 5 + 15) << "later than the limit and a few scrapes";
}

}  // namespace
}  // namespace cifar::e2e
