// What a pod's status says (framework/pod_status.h): its phase, parsed once into PodPhase.
#include "framework/pod_status.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace cifar::op::pod_status_test
