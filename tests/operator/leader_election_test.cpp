// The pure decision of one leader-election round (the Lease itself is exercised against the real
// API server in tests/integration/operator_test.cpp).
#include "framework/leader_election.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "kube/client.h"
#include "tests/support/process.h"

namespace leader_election_test {
namespace {

using cifar::op::ElectionConfig;
using cifar::op::next_lease_spec;
using nlohmann::json;

ElectionConfig me() {
  ElectionConfig config;
  config.identity = "me";
  config.lease_duration = std::chrono::milliseconds(2500);
  return config;
}

json held_by(const std::string& holder) {
  return {{"holderIdentity", holder},
          {"leaseDurationSeconds", 15},
          {"acquireTime", "2026-11-22T10:00:00.000000Z"},
          {"renewTime", "2026-11-22T10:00:05.000000Z"},
          {"leaseTransitions", 4}};
}

const std::string kNow = "2026-11-22T10:01:00.000000Z";

TEST(LeaderElection, NoLeaseIsCreatedHeldByUsWithTheLeaseDurationRoundedUp) {
  const auto spec = next_lease_spec(std::nullopt, false, me(), kNow);
  ASSERT_TRUE(spec);
  EXPECT_EQ((*spec)["holderIdentity"], "me");
  EXPECT_EQ((*spec)["leaseDurationSeconds"], 3);
  EXPECT_EQ((*spec)["acquireTime"], kNow);
  EXPECT_EQ((*spec)["leaseTransitions"], 0);
}

TEST(LeaderElection, ALiveLeaseOfAnotherHolderIsLeftAlone) {
  EXPECT_FALSE(next_lease_spec(held_by("other"), false, me(), kNow));
}

TEST(LeaderElection, AnExpiredLeaseIsTakenOverAsATransition) {
  const auto spec = next_lease_spec(held_by("other"), true, me(), kNow);
  ASSERT_TRUE(spec);
  EXPECT_EQ((*spec)["holderIdentity"], "me");
  EXPECT_EQ((*spec)["acquireTime"], kNow);
  EXPECT_EQ((*spec)["renewTime"], kNow);
  EXPECT_EQ((*spec)["leaseTransitions"], 5);
}

TEST(LeaderElection, RenewingKeepsTheAcquireTimeAndTransitions) {
  const auto spec = next_lease_spec(held_by("me"), false, me(), kNow);
  ASSERT_TRUE(spec);
  EXPECT_EQ((*spec)["acquireTime"], "2026-11-22T10:00:00.000000Z");
  EXPECT_EQ((*spec)["renewTime"], kNow);
  EXPECT_EQ((*spec)["leaseTransitions"], 4);
}

TEST(LeaderElection, AReleasedLeaseIsFreeAtOnce) {
  const auto released = cifar::op::released_lease_spec(held_by("other"), kNow);
  EXPECT_EQ(released["holderIdentity"], "");
  EXPECT_EQ(released["leaseDurationSeconds"], 1);
  const auto spec = next_lease_spec(released, false, me(), kNow);  // not expired, yet free
  ASSERT_TRUE(spec);
  EXPECT_EQ((*spec)["holderIdentity"], "me");
  EXPECT_EQ((*spec)["leaseTransitions"], 5);
}

}  // namespace
}  // namespace leader_election_test

namespace leader_election_test {
namespace {

// Regression: a candidate whose first rounds get no answer (in a pod, before kube-proxy has
// programmed the Service) has read no Lease yet; it must keep standing by, not crash on it.
TEST(LeaderElection, AnApiServerThatDoesNotAnswerYetIsWaitedFor) {
  cifar::kube::ClusterAccess nowhere;
  nowhere.server = "https://127.0.0.1:" + std::to_string(cifar::testing::free_port());
  cifar::kube::Client client(nowhere, "test", std::chrono::milliseconds(200));
  auto config = me();
  config.retry_period = std::chrono::milliseconds(50);
  cifar::op::LeaderElector elector(client, config);
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    stop = true;
  });
  bool led = false;
  int standing_by = 0;
  const auto outcome = elector.run(
      stop, [&](const std::atomic<bool>&) { led = true; },
      [&](bool leading) { standing_by += leading ? 0 : 1; });
  stopper.join();
  EXPECT_EQ(outcome, cifar::op::LeaderElector::Outcome::kStopped);
  EXPECT_FALSE(led);
  EXPECT_GE(standing_by, 2);  // several rounds, each reported as standing by
}

}  // namespace
}  // namespace leader_election_test
