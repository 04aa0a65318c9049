#include "framework/pod_status.h"

#include <array>
#include <initializer_list>
#include <utility>

namespace cifar::op {

using nlohmann::json;

namespace {

constexpr std::array<std::pair<std::string_view, PodPhase>, 5> kPodPhaseNames = {{
    {"Pending", PodPhase::kPending},
    {"Running", PodPhase::kRunning},
    {"Succeeded", PodPhase::kSucceeded},
    {"Failed", PodPhase::kFailed},
    {"Unknown", PodPhase::kUnknown},
}};

}  // namespace

PodPhase parse_pod_phase(std::string_view name) {
  if (name.empty()) return PodPhase::kPending;
  for (const auto& [known, phase] : kPodPhaseNames) {
    if (known == name) return phase;
  }
  return PodPhase::kUnknown;
}

std::string_view pod_phase_name(PodPhase phase) {
  for (const auto& [name, known] : kPodPhaseNames) {
    if (known == phase) return name;
  }
  return "Unknown";
}

PodPhase pod_phase(const json& pod) {
  return parse_pod_phase(pod.value("status", json::object()).value("phase", ""));
}

bool pod_terminating(const json& pod) {
  return pod.value("metadata", json::object()).contains("deletionTimestamp");
}

std::string pod_node(const json& pod) {
  return pod.value("spec", json::object()).value("nodeName", "");
}

int pod_restarts(const json& pod) {
  int n = 0;
  for (const auto& c :
       pod.value("status", json::object()).value("containerStatuses", json::array())) {
    n += c.value("restartCount", 0);
  }
  return n;
}

namespace {

const json& status_of(const json& pod) {
  static const json empty = json::object();
  const auto s = pod.find("status");
  return s == pod.end() || !s->is_object() ? empty : *s;
}

std::optional<Time> time_at(const json& object, const char* field) {
  const auto t = object.find(field);
  if (t == object.end() || !t->is_string()) return std::nullopt;
  try {
    return parse_time(t->get<std::string>());
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

// The status of the pod's first container (the job's pods have one), or nullptr before the
// kubelet reports any.
const json* first_container(const json& pod) {
  const auto& status = status_of(pod);
  const auto containers = status.find("containerStatuses");
  if (containers == status.end() || !containers->is_array() || containers->empty()) return nullptr;
  return &containers->front();
}

// A state of the first container's ("state": now, "lastState": before its latest restart) if it
// is a termination.
std::optional<json> termination_in(const json& pod, const char* which) {
  const auto* container = first_container(pod);
  if (container == nullptr) return std::nullopt;
  const auto state = container->value(which, json::object());
  const auto terminated = state.find("terminated");
  if (terminated == state.end()) return std::nullopt;
  return *terminated;
}

// The first container's last termination: now, or before its latest restart.
std::optional<json> terminated_state(const json& pod) {
  if (auto now = termination_in(pod, "state")) return now;
  return termination_in(pod, "lastState");
}

}  // namespace

std::optional<PodWaiting> pod_waiting(const json& pod) {
  const auto& status = status_of(pod);
  for (const auto& c : status.value("conditions", json::array())) {
    if (c.value("type", "") != "PodScheduled" || c.value("status", "") != "False") continue;
    const auto reason = c.value("reason", "");
    if (reason == "SchedulingGated") return std::nullopt;  // waits in a queue
    return PodWaiting{reason.empty() ? "Unschedulable" : reason, c.value("message", "")};
  }
  for (const auto& c : status.value("containerStatuses", json::array())) {
    const auto waiting = c.value("state", json::object()).value("waiting", json::object());
    const auto reason = waiting.value("reason", "");
    if (reason.empty() || reason == "ContainerCreating" || reason == "PodInitializing") continue;
    return PodWaiting{reason, waiting.value("message", "")};
  }
  return std::nullopt;
}

bool pod_gated(const json& pod) {
  for (const auto& c : status_of(pod).value("conditions", json::array())) {
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False" &&
        c.value("reason", "") == "SchedulingGated") {
      return true;
    }
  }
  const auto spec = pod.find("spec");
  return spec != pod.end() && spec->is_object() &&
         !spec->value("schedulingGates", json::array()).empty();
}

bool pod_started(const json& pod) {
  for (const auto& c : status_of(pod).value("containerStatuses", json::array())) {
    const auto state = c.value("state", json::object());
    if (state.contains("running") || state.contains("terminated") ||
        c.value("lastState", json::object()).contains("terminated") ||
        c.value("restartCount", 0) > 0) {
      return true;
    }
  }
  const auto phase = pod_phase(pod);
  return phase == PodPhase::kRunning || phase == PodPhase::kSucceeded || phase == PodPhase::kFailed;
}

std::optional<Time> pod_created_at(const json& pod) {
  return time_at(pod.value("metadata", json::object()), "creationTimestamp");
}

std::optional<Time> pod_deletion_due(const json& pod) {
  return time_at(pod.value("metadata", json::object()), "deletionTimestamp");
}

std::optional<int> pod_exit_code(const json& pod) {
  const auto terminated = terminated_state(pod);
  return terminated ? std::optional<int>(terminated->value("exitCode", 0)) : std::nullopt;
}

std::optional<int> pod_exit_code_before_restart(const json& pod) {
  const auto last = termination_in(pod, "lastState");
  return last ? std::optional<int>(last->value("exitCode", 0)) : std::nullopt;
}

std::optional<ContainerEnd> pod_container_ended(const json& pod) {
  const auto now = termination_in(pod, "state");
  if (!now) return std::nullopt;
  return ContainerEnd{now->value("exitCode", 0), now->value("reason", "")};
}

std::optional<Time> pod_finished_at(const json& pod) {
  const auto terminated = terminated_state(pod);
  return terminated ? time_at(*terminated, "finishedAt") : std::nullopt;
}

std::optional<Time> pod_running_since(const json& pod) {
  const auto* container = first_container(pod);
  if (container == nullptr) return std::nullopt;
  const auto state = container->value("state", json::object());
  const auto running = state.find("running");
  return running == state.end() ? std::nullopt : time_at(*running, "startedAt");
}

std::string pod_termination_message(const json& pod) {
  const auto terminated = terminated_state(pod);
  return terminated ? terminated->value("message", "") : "";
}

bool pod_ready(const json& pod) {
  for (const auto& c : pod.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

void trim_pod_status(json& status) {
  json trimmed = json::object();
  const auto keep = [](json& from, json& to, std::initializer_list<const char*> fields) {
    for (const auto* field : fields) {
      if (const auto it = from.find(field); it != from.end()) to[field] = std::move(*it);
    }
  };
  keep(status, trimmed, {"phase", "reason", "message", "podIP"});
  if (const auto conditions = status.find("conditions"); conditions != status.end()) {
    auto& kept = trimmed["conditions"] = json::array();
    for (auto& condition : *conditions) {
      const auto type = condition.value("type", "");
      if (type != "PodScheduled" && type != "Ready") continue;
      kept.push_back(json::object());
      keep(condition, kept.back(), {"type", "status", "reason", "message"});
    }
  }
  if (const auto containers = status.find("containerStatuses"); containers != status.end()) {
    auto& kept = trimmed["containerStatuses"] = json::array();
    for (auto& container : *containers) {
      kept.push_back(json::object());
      keep(container, kept.back(), {"name", "state", "lastState", "restartCount"});
    }
  }
  status = std::move(trimmed);
}

}  // namespace cifar::op
