#include "framework/pod_status.h"

namespace cifar::op {

using nlohmann::json;

std::string pod_phase(const json& pod) {
  return pod.value("status", json::object()).value("phase", "");
}

bool pod_terminating(const json& pod) {
  return pod.value("metadata", json::object()).contains("deletionTimestamp");
}

std::optional<int> pod_exit_code(const json& pod) {
  for (const auto& c :
       pod.value("status", json::object()).value("containerStatuses", json::array())) {
    const auto state = c.value("state", json::object());
    if (state.contains("terminated")) return state["terminated"].value("exitCode", 0);
    const auto last = c.value("lastState", json::object());
    if (last.contains("terminated")) return last["terminated"].value("exitCode", 0);
  }
  return std::nullopt;
}

int pod_restarts(const json& pod) {
  int n = 0;
  for (const auto& c :
       pod.value("status", json::object()).value("containerStatuses", json::array())) {
    n += c.value("restartCount", 0);
  }
  return n;
}

bool pod_ready(const json& pod) {
  for (const auto& c : pod.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

}  // namespace cifar::op
