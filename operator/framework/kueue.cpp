#include "framework/kueue.h"

namespace cifar::op::kueue {

using nlohmann::json;

namespace {

// The status condition `type` of a Workload or a pod.
const json* condition(const json& object, std::string_view type) {
  const auto status = object.find("status");
  if (status == object.end() || !status->is_object()) return nullptr;
  const auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) return nullptr;
  for (const auto& c : *conditions) {
    if (c.value("type", "") == type) return &c;
  }
  return nullptr;
}

bool is_true(const json* c) { return c != nullptr && c->value("status", "") == "True"; }

std::optional<Time> transition_time(const json& c) {
  try {
    return parse_time(c.value("lastTransitionTime", ""));
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

}  // namespace

kube::ResourcePath workloads(const std::string& ns) {
  return {"kueue.x-k8s.io", "v1beta2", "workloads", ns, "", ""};
}

WorkloadState workload_state(const json& workload) {
  WorkloadState state;
  const auto* reserved = condition(workload, "QuotaReserved");
  state.quota_reserved = is_true(reserved);
  if (reserved != nullptr && !state.quota_reserved) {
    state.waiting_reason = reserved->value("reason", "");
    state.waiting_message = reserved->value("message", "");
  }
  const auto* admitted = condition(workload, "Admitted");
  state.admitted = is_true(admitted);
  if (state.admitted) state.admitted_since = transition_time(*admitted);
  // Evicted after its latest admission (it stays Admitted until its pods are gone).
  if (const auto* evicted = condition(workload, "Evicted"); is_true(evicted)) {
    const auto since = transition_time(*evicted);
    state.evicted =
        !state.admitted || !since || !state.admitted_since || *since >= *state.admitted_since;
    if (state.evicted) {
      state.eviction_reason = evicted->value("reason", "");
      state.eviction_message = evicted->value("message", "");
    }
  }
  state.finished = is_true(condition(workload, "Finished"));
  state.deleting = workload.value("metadata", json::object()).contains("deletionTimestamp");
  return state;
}

void trim_workload(json& workload) {
  auto metadata = workload.value("metadata", json::object());
  metadata.erase("managedFields");
  metadata.erase("ownerReferences");  // one per pod of the group
  json conditions = json::array();
  const auto status = workload.find("status");
  if (status != workload.end() && status->is_object()) {
    conditions = status->value("conditions", json::array());
  }
  workload = {{"metadata", std::move(metadata)},
              {"status", {{"conditions", std::move(conditions)}}}};
}

std::optional<std::string> eviction_message(const json& pod) {
  const auto* c = condition(pod, "TerminationTarget");
  // "WorkloadEvictedDueToPreempted", "WorkloadEvictedDueToPodsReadyTimeout", ...
  if (!is_true(c) || c->value("reason", "").rfind("WorkloadEvicted", 0) != 0) return std::nullopt;
  return c->value("message", "");
}

bool managed(const json& pod) {
  const auto labels = pod.at("metadata").value("labels", json::object());
  return labels.value(std::string(kManagedLabel), "") == "true";
}

bool holds(const json& pod) {
  for (const auto& f : pod.at("metadata").value("finalizers", json::array())) {
    if (f.is_string() && f.get<std::string>() == kPodFinalizer) return true;
  }
  return false;
}

json release_patch() {
  return {{"metadata",
           {{"$deleteFromPrimitiveList/finalizers", json::array({std::string(kPodFinalizer)})}}}};
}

}  // namespace cifar::op::kueue
