#include "framework/node_status.h"

namespace cifar::op {

using nlohmann::json;

namespace {

std::optional<json> ready_condition(const json& node) {
  const auto status = node.find("status");
  if (status == node.end() || !status->is_object()) return std::nullopt;
  for (const auto& condition : status->value("conditions", json::array())) {
    if (condition.value("type", "") == "Ready") return condition;
  }
  return std::nullopt;
}

bool out_of_service(const json& node) {
  const auto spec = node.find("spec");
  if (spec == node.end() || !spec->is_object()) return false;
  for (const auto& taint : spec->value("taints", json::array())) {
    if (taint.value("key", "") == kOutOfServiceTaint) return true;
  }
  return false;
}

Time transition_time(const json& condition) {
  try {
    return parse_time(condition.value("lastTransitionTime", ""));
  } catch (const std::invalid_argument&) {
    return Time{};  // unknown: as long ago as can be
  }
}

}  // namespace

std::optional<NodeTrouble> node_trouble(const json& node) {
  const auto ready = ready_condition(node);
  const bool gone = out_of_service(node);
  const bool not_ready = ready && ready->value("status", "") != "True";
  if (!gone && !not_ready) return std::nullopt;
  NodeTrouble trouble;
  trouble.out_of_service = gone;
  if (ready) {
    trouble.reason = ready->value("reason", ready->value("status", ""));
    trouble.message = ready->value("message", "");
    trouble.since = transition_time(*ready);
    trouble.unreachable = ready->value("status", "") == "Unknown";
  }
  if (gone) {
    trouble.reason = "OutOfService";
    trouble.message = "tainted " + std::string(kOutOfServiceTaint);
  }
  return trouble;
}

void trim_node(json& node) {
  json conditions = json::array();
  if (auto ready = ready_condition(node)) {
    ready->erase("lastHeartbeatTime");  // changes with every status report, says nothing new
    conditions.push_back(std::move(*ready));
  }
  json trimmed = {
      {"metadata",
       {{"name", node["metadata"].value("name", "")},
        {"resourceVersion", node["metadata"].value("resourceVersion", "")}}},
      {"spec", {{"taints", node.value("spec", json::object()).value("taints", json::array())}}},
      {"status", {{"conditions", std::move(conditions)}}}};
  node = std::move(trimmed);
}

}  // namespace cifar::op
