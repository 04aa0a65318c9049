// What a pod's status says, read from the pod as the API server returns it (any pod: nothing
// here knows which controller made it).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace cifar::op {

std::string pod_phase(const nlohmann::json& pod);  // "Pending", "Running", ...; "" before any
bool pod_terminating(const nlohmann::json& pod);   // has a deletionTimestamp
// The exit code of the pod's (first) container that terminated, now or in its last run.
std::optional<int> pod_exit_code(const nlohmann::json& pod);
int pod_restarts(const nlohmann::json& pod);  // its containers' in-place restarts
bool pod_ready(const nlohmann::json& pod);    // condition Ready is True

}  // namespace cifar::op
