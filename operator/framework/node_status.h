// What a Node's status says of its health, read from the Node as the API server returns it: a
// node whose kubelet stopped answering (condition Ready Unknown, set by the node lifecycle
// controller once the node's lease is older than its grace period), or one that says it is not
// ready (Ready False), or one an administrator declared gone (the
// node.kubernetes.io/out-of-service taint, upstream's way to say "this node is shut down").
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "framework/clock.h"

namespace cifar::op {

inline constexpr const char* kOutOfServiceTaint = "node.kubernetes.io/out-of-service";

struct NodeTrouble {
  std::string reason;   // the Ready condition's (NodeStatusUnknown, KubeletNotReady), or the taint
  std::string message;  // its message
  Time since;           // when Ready last changed (its lastTransitionTime)
  bool out_of_service = false;
  bool operator==(const NodeTrouble& other) const {
    return reason == other.reason && since == other.since && out_of_service == other.out_of_service;
  }
  bool operator!=(const NodeTrouble& other) const { return !(*this == other); }
};

// Nodes in trouble, by name.
using NodeTroubles = std::map<std::string, NodeTrouble>;

// nullopt for a healthy node: Ready True (or not reported yet) and not out of service.
std::optional<NodeTrouble> node_trouble(const nlohmann::json& node);

// A Node as a controller that only asks node_trouble keeps it: its name, taints and Ready
// condition (a Node's images, addresses and capacity are most of its size).
void trim_node(nlohmann::json& node);

}  // namespace cifar::op
