#include "cifartrainjob/node_health.h"

#include <spdlog/spdlog.h>

#include "framework/pod_status.h"

namespace cifar::op {

NodeHealth::NodeHealth(kube::Client& client, OnChange on_change)
    : on_change_(std::move(on_change)),
      nodes_(
          client, kube::nodes(), kube::ListOptions{},
          [this](const nlohmann::json& node) { note_node(node["metadata"].value("name", "")); },
          trim_node) {}

void NodeHealth::note_node(const std::string& name) {
  const auto cached = nodes_.get("/" + name);
  const auto trouble = cached ? node_trouble(*cached) : std::nullopt;
  {
    const std::lock_guard lock(mu_);
    const auto known = troubled_.find(name);
    const bool was = known != troubled_.end();
    if (!trouble && !was) return;
    if (trouble && was && known->second == *trouble) return;
    if (trouble) {
      spdlog::warn("node {} is in trouble: {} {}", name, trouble->reason, trouble->message);
      troubled_[name] = *trouble;
    } else {
      spdlog::info("node {} is {}", name, cached ? "Ready again" : "gone");
      troubled_.erase(known);
    }
  }
  on_change_(name);
}

NodeTroubles NodeHealth::troubled_nodes_of(const std::vector<nlohmann::json>& pods) {
  NodeTroubles troubles;
  const std::lock_guard lock(mu_);
  if (troubled_.empty()) return troubles;
  for (const auto& pod : pods) {
    if (const auto found = troubled_.find(pod_node(pod)); found != troubled_.end()) {
      troubles.insert(*found);
    }
  }
  return troubles;
}

}  // namespace cifar::op
