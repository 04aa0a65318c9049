// The health of the nodes: a watch of the Nodes (cluster-scoped) and the ones in trouble
// (node_status.h), for the reconcile of the jobs whose pods are on them (Observed::troubled_nodes).
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "framework/informer.h"
#include "framework/node_status.h"
#include "kube/client.h"

namespace cifar::op {

class NodeHealth {
 public:
  // Called, from the watch's thread, with the name of a node whose trouble began, changed or
  // ended: the jobs with pods on it look again.
  using OnChange = std::function<void(const std::string& node)>;
  NodeHealth(kube::Client& client, OnChange on_change);

  void start() { nodes_.start(); }
  void stop() { nodes_.stop(); }
  [[nodiscard]] bool wait_for_sync(std::chrono::milliseconds timeout) const {
    return nodes_.wait_for_sync(timeout);
  }
  // The nodes in trouble among those of `pods`.
  NodeTroubles troubled_nodes_of(const std::vector<nlohmann::json>& pods);

 private:
  void note_node(const std::string& name);

  OnChange on_change_;
  // Written by the watch's thread, read by the workers: before the informer, which outlives its
  // users only if declared after them.
  std::mutex mu_;
  NodeTroubles troubled_;
  Informer nodes_;
};

}  // namespace cifar::op
