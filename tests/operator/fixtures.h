// What the operator's pure tests start from: a fixed clock, observed pods and job statuses.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>

#include "api/status.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"

namespace cifar::op::testing {

// The reconcile tests' "now" at the start; they count in seconds from it.
inline const Clock::time_point kT0 = parse_time("2026-11-22T12:00:00Z");

// The job's Service made, none of its pods.
inline Observed no_pods() {
  Observed observed;
  observed.service_exists = true;
  return observed;
}

// The value of the pod's env var `name` ("" if absent, "(ref)" if it comes from a reference).
inline std::string env_of(const nlohmann::json& pod, const std::string& name) {
  for (const auto& var : pod["spec"]["containers"][0]["env"]) {
    if (var["name"] == name) {
      return var.contains("value") ? var["value"].get<std::string>() : "(ref)";
    }
  }
  return "";
}

// `pod` (a desired pod) with a UID of its own, as the API server gives every pod it creates.
inline nlohmann::json created(nlohmann::json pod) {
  static int created_pods = 0;
  pod["metadata"]["uid"] = "uid-" + std::to_string(++created_pods);
  return pod;
}

// `pod` (a desired pod) as the API server shows it once created at `created_at` and running
// (with a new UID unless it has one).
inline nlohmann::json running_pod(nlohmann::json pod, Clock::time_point created_at) {
  if (!pod["metadata"].contains("uid")) pod = created(std::move(pod));
  pod["metadata"]["creationTimestamp"] = format_time(created_at);
  pod["status"] = {{"phase", "Running"},
                   {"containerStatuses",
                    {{{"name", "cifar-train"},
                      {"state", {{"running", {{"startedAt", format_time(created_at)}}}}}}}}};
  return pod;
}

// The observed pod of that name, to change in place.
inline nlohmann::json& pod_named(Observed& observed, const std::string& name) {
  for (auto& pod : observed.pods) {
    if (pod["metadata"]["name"] == name) return pod;
  }
  throw std::runtime_error("no pod " + name);
}

// A job whose pods run since `since`, nothing restarted.
inline JobStatus running_since(Clock::time_point since) {
  JobStatus status;
  status.set_state(ConditionType::kRunning, reason::kJobRunning, "running", to_time(since));
  status.start_time = to_time(since);
  status.restarts = 0;
  return status;
}

}  // namespace cifar::op::testing
