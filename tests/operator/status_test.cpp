// The typed status (api/status.h): what it reads is what it writes, field for field, since the
// controller sends it as a merge patch (a field left out of it would be removed); the condition
// rules; and the patch built from it (framework/merge_patch.h).
#include "api/status.h"

#include <gtest/gtest.h>

#include "framework/merge_patch.h"

namespace cifar::op::status_test {
namespace {

using nlohmann::json;

const Time kT0 = parse_time("2026-11-22T12:00:00Z");

// A status as the operator and the progress scraper write it.
json full_status() {
  return json::parse(R"({
    "state": "Running",
    "conditions": [
      {"type": "Created", "status": "True", "reason": "JobCreated",
       "message": "created the Service and 5 pods",
       "lastTransitionTime": "2026-11-22T12:00:00Z", "lastUpdateTime": "2026-11-22T12:00:00Z"},
      {"type": "Restarting", "status": "False", "reason": "JobRunning", "message": "",
       "lastTransitionTime": "2026-11-22T12:01:00Z", "lastUpdateTime": "2026-11-22T12:01:00Z"},
      {"type": "Running", "status": "True", "reason": "JobRunning",
       "message": "the job's pods are running",
       "lastTransitionTime": "2026-11-22T12:01:00Z", "lastUpdateTime": "2026-11-22T12:01:00Z"}],
    "replicaStatuses": {"PS": {"active": 1, "ready": 1, "succeeded": 0, "failed": 0},
                        "Worker": {"active": 2, "ready": 1, "succeeded": 0, "failed": 1}},
    "startTime": "2026-11-22T12:00:00Z",
    "restarts": 1,
    "podRestarts": {"3f2a-worker-1-uid": 1},
    "nodeLoss": {"node": "n2", "pods": ["j-worker-1"], "step": 1180,
                 "since": "2026-11-22T12:00:00Z"},
    "stallsByNode": {"n1": 1, "n2": 2},
    "suspectNodes": ["n2"],
    "progress": {"epoch": 3, "step": 1200, "loss": 0.75, "trainAccuracy": 0.7,
                 "imagesPerSecond": 812.5, "updatedAt": "2026-11-22T12:05:00Z"}})");
}

TEST(JobStatus, WritesBackWhatItRead) {
  const auto read = full_status();
  const auto status = read.get<JobStatus>();
  EXPECT_EQ(json(status), read);
  EXPECT_EQ(status.state, ConditionType::kRunning);
  EXPECT_EQ(status.restarts, 1);
  EXPECT_EQ(status.pod_restarts->at("3f2a-worker-1-uid"), 1);
  EXPECT_EQ(status.start_time, kT0);
  EXPECT_FALSE(status.completion_time);
  EXPECT_EQ(status.replica_statuses->at("Worker").failed, 1);
  EXPECT_TRUE(status.is_true(ConditionType::kRunning));
  EXPECT_FALSE(status.is_true(ConditionType::kRestarting));
  EXPECT_FALSE(status.finished());
  EXPECT_EQ(status.progress["step"], 1200);
  ASSERT_TRUE(status.node_loss);
  EXPECT_EQ(status.node_loss->pods, std::vector<std::string>{"j-worker-1"});
  EXPECT_EQ(status.node_loss->step, 1180);
  EXPECT_EQ(status.node_loss->since, kT0);
  EXPECT_EQ(status.stalls_by_node->at("n2"), 2);
  EXPECT_EQ(status.suspect_nodes, std::vector<std::string>{"n2"});
}

TEST(JobStatus, AbsentFieldsStayAbsentAndEmptyOnesStayEmpty) {
  EXPECT_EQ(json(json().get<JobStatus>()), json::object());
  EXPECT_EQ(json(json::object().get<JobStatus>()), json::object());
  const json empty = {{"conditions", json::array()}, {"replicaStatuses", json::object()}};
  EXPECT_EQ(json(empty.get<JobStatus>()), empty);
}

TEST(JobStatus, KeepsFieldsItDoesNotKnow) {
  auto read = full_status();
  read["observedGeneration"] = 4;
  EXPECT_EQ(json(read.get<JobStatus>()), read);
}

TEST(JobStatus, RefusesAConditionTypeItDoesNotKnow) {
  EXPECT_THROW(json::parse(R"({"state": "Exploded"})").get<JobStatus>(), std::invalid_argument);
  EXPECT_THROW(
      json::parse(R"({"conditions": [{"type": "Exploded", "status": "True"}]})").get<JobStatus>(),
      std::invalid_argument);
}

TEST(JobStatus, EveryConditionTypeHasOneName) {
  for (const auto type : kConditionTypes) {
    EXPECT_EQ(parse_condition_type(condition_type_name(type)), type);
  }
  EXPECT_FALSE(is_exclusive(ConditionType::kCreated));
  EXPECT_TRUE(is_exclusive(ConditionType::kFailed));
}

TEST(JobStatus, AConditionsTransitionTimeMovesOnlyWithItsStatus) {
  JobStatus status;
  status.set_condition(ConditionType::kSuspended, false, reason::kJobResumed, "m", kT0);
  ASSERT_TRUE(status.conditions);
  EXPECT_TRUE(status.conditions->empty());  // never held: not listed
  status.set_condition(ConditionType::kRunning, true, reason::kJobRunning, "m", kT0);
  const auto later = kT0 + std::chrono::seconds(10);
  status.set_condition(ConditionType::kRunning, true, reason::kPodRestarting, "n", later);
  const auto* running = status.condition(ConditionType::kRunning);
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(running->last_transition_time, kT0);
  EXPECT_EQ(running->last_update_time, later);  // the reason changed
  EXPECT_EQ(running->message, "n");
  status.set_condition(ConditionType::kRunning, false, reason::kJobSucceeded, "o", later);
  EXPECT_EQ(status.condition(ConditionType::kRunning)->last_transition_time, later);
}

TEST(JobStatus, AStateTurnsTheOtherExclusiveConditionsFalse) {
  JobStatus status;
  status.set_condition(ConditionType::kCreated, true, reason::kJobCreated, "c", kT0);
  status.set_state(ConditionType::kRunning, reason::kJobRunning, "r", kT0);
  status.set_state(ConditionType::kSucceeded, reason::kJobSucceeded, "s", kT0);
  EXPECT_EQ(status.state, ConditionType::kSucceeded);
  EXPECT_TRUE(status.is_true(ConditionType::kCreated));  // not exclusive
  EXPECT_FALSE(status.is_true(ConditionType::kRunning));
  EXPECT_EQ(status.condition(ConditionType::kRunning)->reason, reason::kJobSucceeded);
  EXPECT_TRUE(status.finished());
}

TEST(StatusPatch, RemovesWhatTheNewStatusLacksAndNothingElse) {
  const auto old_status = full_status();
  auto status = old_status.get<JobStatus>();
  status.start_time.reset();  // as a suspend does
  status.set_state(ConditionType::kSuspended, reason::kJobSuspended, "s", kT0);
  const auto patch = replacing_merge_patch(old_status, status);
  EXPECT_TRUE(patch["startTime"].is_null());
  EXPECT_EQ(patch["progress"], old_status["progress"]);  // the scraper's, kept
  EXPECT_EQ(patch["restarts"], 1);
  EXPECT_EQ(patch["state"], "Suspended");
  for (const auto& [field, value] : patch.items()) {
    EXPECT_TRUE(field == "startTime" || !value.is_null()) << field;
  }
  EXPECT_EQ(replacing_merge_patch(old_status, old_status), old_status);
}

// The server merges nested objects: a key a nested object lost is sent as null (a finished job's
// progress drops its estimate of the time to go).
TEST(StatusPatch, RemovesWhatANestedObjectLacks) {
  const json old_status = {{"progress", {{"step", 40}, {"estimatedRemainingSeconds", 10}}},
                           {"conditions", json::array({{{"type", "Running"}}})}};
  const json status = {{"progress", {{"step", 45}, {"progressPercentage", 100}}},
                       {"conditions", json::array()}};
  const auto patch = replacing_merge_patch(old_status, status);
  EXPECT_EQ(
      patch["progress"],
      (json{{"step", 45}, {"progressPercentage", 100}, {"estimatedRemainingSeconds", nullptr}}));
  EXPECT_EQ(patch["conditions"], json::array());  // arrays are replaced whole
}

}  // namespace
}  // namespace cifar::op::status_test
