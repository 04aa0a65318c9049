// What a Node's status says of its health, read from the Node as the API server returns it: a
// node whose kubelet stopped answering (condition Ready Unknown, set by the node lifecycle
// controller once the node's lease is older than its grace period: lost), one an administrator
// declared gone (the node.kubernetes.io/out-of-service taint, upstream's way to say "this node is
// shut down": lost too), or one whose kubelet answers that it is not ready (Ready False: its
// runtime or network is down, but the kubelet itself can still end the pods there).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "framework/clock.h"

namespace cifar::op {

inline constexpr std::string_view kOutOfServiceTaint = "node.kubernetes.io/out-of-service";

struct NodeTrouble {
  std::string reason;   // the Ready condition's (NodeStatusUnknown, KubeletNotReady), or the taint
  std::string message;  // its message
  Time since;           // when Ready last changed (its lastTransitionTime)
  bool unreachable = false;  // Ready Unknown: its kubelet stopped posting its status
  bool out_of_service = false;
  // Lost: its kubelet no longer answers (Ready Unknown) or it is out of service. Nothing on it
  // can confirm a pod's end, so its pods are replaced; a node that is only not ready is reported.
  [[nodiscard]] bool lost() const { return out_of_service || unreachable; }
  // What changes what the operator does (the message's wording does not).
  bool operator==(const NodeTrouble& other) const {
    return reason == other.reason && since == other.since && unreachable == other.unreachable &&
           out_of_service == other.out_of_service;
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
