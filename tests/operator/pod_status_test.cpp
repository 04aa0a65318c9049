// What a pod's status says (framework/pod_status.h): its phase, parsed once into PodPhase; and
// that a status trimmed for the cache reads as the whole one.
#include "framework/pod_status.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cifar::op::pod_status_test {
namespace {

using nlohmann::json;

TEST(PodPhase, ParsesTheApiServersNames) {
  EXPECT_EQ(parse_pod_phase("Pending"), PodPhase::kPending);
  EXPECT_EQ(parse_pod_phase("Running"), PodPhase::kRunning);
  EXPECT_EQ(parse_pod_phase("Succeeded"), PodPhase::kSucceeded);
  EXPECT_EQ(parse_pod_phase("Failed"), PodPhase::kFailed);
  EXPECT_EQ(parse_pod_phase("Unknown"), PodPhase::kUnknown);
}

TEST(PodPhase, NoPhaseYetIsPendingAndAnUnknownNameUnknown) {
  EXPECT_EQ(parse_pod_phase(""), PodPhase::kPending);  // the status not written yet
  EXPECT_EQ(parse_pod_phase("running"), PodPhase::kUnknown);
  EXPECT_EQ(parse_pod_phase("Terminating"), PodPhase::kUnknown);
}

TEST(PodPhase, NamesReadBack) {
  for (const auto phase : {PodPhase::kPending, PodPhase::kRunning, PodPhase::kSucceeded,
                           PodPhase::kFailed, PodPhase::kUnknown}) {
    EXPECT_EQ(parse_pod_phase(pod_phase_name(phase)), phase);
  }
  EXPECT_EQ(pod_phase_name(PodPhase::kSucceeded), "Succeeded");
}

TEST(PodPhase, ReadFromThePod) {
  EXPECT_EQ(pod_phase(json::object()), PodPhase::kPending);
  EXPECT_EQ(pod_phase(json{{"status", json::object()}}), PodPhase::kPending);
  EXPECT_EQ(pod_phase(json{{"status", {{"phase", "Failed"}}}}), PodPhase::kFailed);
}

// Statuses as the API server writes them, one for each thing a reader looks for.
std::vector<json> whole_pods() {
  const json scheduled = {{"type", "PodScheduled"},
                          {"status", "True"},
                          {"lastProbeTime", nullptr},
                          {"lastTransitionTime", "2026-12-01T16:08:57Z"}};
  const json ready = {{"type", "Ready"},
                      {"status", "True"},
                      {"lastProbeTime", nullptr},
                      {"lastTransitionTime", "2026-12-01T16:09:01Z"}};
  const json initialized = {{"type", "Initialized"}, {"status", "True"}};
  const auto container = [](json state, json last_state, int restarts) {
    return json{{"name", "cifar-train"},
                {"image", "cifar-train:bench"},
                {"imageID", "sha256:0123"},
                {"containerID", "containerd://4567"},
                {"ready", true},
                {"started", true},
                {"restartCount", restarts},
                {"state", std::move(state)},
                {"lastState", std::move(last_state)}};
  };
  const auto pod = [](json status) {
    return json{
        {"metadata", {{"name", "job-worker-0"}, {"creationTimestamp", "2026-12-01T16:08:57Z"}}},
        {"spec", {{"nodeName", "node-1"}}},
        {"status", std::move(status)}};
  };
  const json ended = {{"terminated",
                       {{"exitCode", 137},
                        {"reason", "OOMKilled"},
                        {"message", "step 40"},
                        {"startedAt", "2026-12-01T16:09:01Z"},
                        {"finishedAt", "2026-12-01T16:19:01Z"}}}};
  return {
      pod({{"phase", "Running"},
           {"podIP", "10.64.0.53"},
           {"podIPs", {{{"ip", "10.64.0.53"}}}},
           {"hostIP", "10.0.0.2"},
           {"qosClass", "BestEffort"},
           {"startTime", "2026-12-01T16:09:01Z"},
           {"conditions", {initialized, ready, scheduled}},
           {"containerStatuses",
            {container({{"running", {{"startedAt", "2026-12-01T16:09:01Z"}}}}, ended, 1)}}}),
      pod({{"phase", "Failed"},
           {"reason", "Evicted"},
           {"message", "The node was low on resource: memory."},
           {"conditions", {initialized, scheduled}},
           {"containerStatuses", {container(ended, json::object(), 0)}}}),
      pod({{"phase", "Pending"},
           {"conditions",
            {{{"type", "PodScheduled"},
              {"status", "False"},
              {"reason", "Unschedulable"},
              {"message", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}}}}}),
      pod({{"phase", "Pending"},
           {"conditions",
            {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "SchedulingGated"}}}}}),
      pod({{"phase", "Pending"},
           {"conditions", {initialized, scheduled}},
           {"containerStatuses",
            {container({{"waiting", {{"reason", "ImagePullBackOff"}, {"message", "not found"}}}},
                       json::object(), 0)}}}),
  };
}

// Every reader's answer for a pod, as text.
std::string readings(const json& pod) {
  const auto text = [](const auto& value) {
    if (!value) return std::string("-");
    return std::to_string(*value);
  };
  const auto time = [](const std::optional<Time>& t) { return t ? format_time(*t) : "-"; };
  const auto waiting = pod_waiting(pod);
  const auto ended = pod_container_ended(pod);
  return std::string(pod_phase_name(pod_phase(pod))) + " node " + pod_node(pod) + " exit " +
         text(pod_exit_code(pod)) + " before restart " + text(pod_exit_code_before_restart(pod)) +
         " ended " + (ended ? std::to_string(ended->exit_code) + " " + ended->reason : "-") +
         " restarts " + std::to_string(pod_restarts(pod)) + " ready " +
         std::to_string(pod_ready(pod)) + " waiting " +
         (waiting ? waiting->reason + ": " + waiting->message : "-") + " gated " +
         std::to_string(pod_gated(pod)) + " started " + std::to_string(pod_started(pod)) +
         " created " + time(pod_created_at(pod)) + " finished " + time(pod_finished_at(pod)) +
         " message " + pod_termination_message(pod) + " running since " +
         time(pod_running_since(pod));
}

TEST(TrimPodStatus, EveryReaderAnswersAsOnTheWholeStatus) {
  for (const auto& whole : whole_pods()) {
    auto trimmed = whole;
    trim_pod_status(trimmed["status"]);
    EXPECT_LE(trimmed.dump().size(), whole.dump().size());
    EXPECT_EQ(readings(trimmed), readings(whole)) << whole["status"].dump();
  }
}

TEST(TrimPodStatus, KeepsTheAddressAndDropsWhatNoReaderReads) {
  auto status = whole_pods().front()["status"];
  trim_pod_status(status);
  EXPECT_EQ(status.value("podIP", ""), "10.64.0.53");  // the progress scrape's
  for (const auto* dropped : {"podIPs", "hostIP", "qosClass", "startTime"}) {
    EXPECT_FALSE(status.contains(dropped)) << dropped;
  }
  ASSERT_EQ(status["conditions"].size(), 2U);  // Ready and PodScheduled, not Initialized
  EXPECT_FALSE(status["conditions"][0].contains("lastTransitionTime"));
  EXPECT_FALSE(status["containerStatuses"][0].contains("imageID"));
}

}  // namespace
}  // namespace cifar::op::pod_status_test
