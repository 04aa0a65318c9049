// Kueue's plain pod-group integration (sigs.k8s.io/kueue v0.17, "Run Plain Pods as a group"), as
// a controller that makes the pods sees it: what each pod of a group carries so that Kueue queues
// and admits the group as one (a queue and a group name, the group's size), what Kueue puts on
// the pods (a scheduling gate until the group is admitted, a finalizer until the group ends), and
// what Kueue's Workload for the group says (admitted, waiting and why, evicted, finished). No
// code of Kueue's is needed: its webhook and controller act on these labels alone.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "framework/clock.h"
#include "kube/client.h"

namespace cifar::op::kueue {

// On every pod of a group, at creation.
inline constexpr std::string_view kQueueNameLabel = "kueue.x-k8s.io/queue-name";  // LocalQueue
inline constexpr std::string_view kPodGroupNameLabel = "kueue.x-k8s.io/pod-group-name";
inline constexpr std::string_view kPodGroupTotalCountAnnotation =
    "kueue.x-k8s.io/pod-group-total-count";
// "false": the group ends (and gives back its quota) once none of its pods is left to run, instead
// of waiting for replacements of the failed ones until all N succeeded.
inline constexpr std::string_view kRetriableInGroupAnnotation = "kueue.x-k8s.io/retriable-in-group";
// Topology Aware Scheduling, on every pod of a group alike: the topology level (a node label)
// whose one domain must (required) or should (preferred) hold the pod set, and one name for all
// the group's pod sets (Kueue makes a pod set of each pod shape: PS, chief, workers, evaluator),
// so that they are placed in the same domain.
inline constexpr std::string_view kPodSetRequiredTopologyAnnotation =
    "kueue.x-k8s.io/podset-required-topology";
inline constexpr std::string_view kPodSetPreferredTopologyAnnotation =
    "kueue.x-k8s.io/podset-preferred-topology";
inline constexpr std::string_view kPodSetGroupNameAnnotation = "kueue.x-k8s.io/podset-group-name";
// What Kueue's webhook puts on a pod it manages.
inline constexpr std::string_view kManagedLabel = "kueue.x-k8s.io/managed";
inline constexpr std::string_view kPodFinalizer = "kueue.x-k8s.io/managed";

// Workloads (kueue.x-k8s.io/v1beta2, the version Kueue stores) in namespace `ns` ("": all).
kube::ResourcePath workloads(const std::string& ns = "");

// What a Workload's status says (its conditions).
struct WorkloadState {
  bool quota_reserved = false;  // QuotaReserved True: it holds a ClusterQueue's quota
  bool admitted = false;        // Admitted True: quota reserved and admission checks passed
  std::optional<Time> admitted_since;
  // QuotaReserved False: why it waits, in Kueue's words ("Pending", "Inadmissible"; "couldn't
  // assign flavors to pod set ...: insufficient unused quota for cpu in flavor ...").
  std::string waiting_reason;
  std::string waiting_message;
  // Evicted True since its latest admission: its pods are being (or were) deleted to free the
  // quota; it stays Admitted until they are gone.
  bool evicted = false;
  std::string eviction_reason;  // "Preempted", "PodsReadyTimeout", "Deactivated", ...
  std::string eviction_message;
  bool finished = false;  // Finished True: the group ended; Kueue no longer admits it
  bool deleting = false;  // has a deletionTimestamp
};
WorkloadState workload_state(const nlohmann::json& workload);

// A Workload as a controller that only asks workload_state keeps it: its metadata without
// managedFields and its status's conditions (its spec repeats the pods' spec).
void trim_workload(nlohmann::json& workload);

// The message of a pod Kueue stopped because it evicted the pod's group (condition
// TerminationTarget, reason WorkloadEvictedDueTo...: "Preempted to accommodate a workload ..."),
// if it did.
// The pods say so as long as they are there, also once the group's Workload has ended.
std::optional<std::string> eviction_message(const nlohmann::json& pod);

// Whether Kueue's webhook took the pod (its label), and whether Kueue's finalizer still holds it.
bool managed(const nlohmann::json& pod);
bool holds(const nlohmann::json& pod);
// The strategic merge patch that takes Kueue's finalizer off a pod (and no other finalizer).
nlohmann::json release_patch();

}  // namespace cifar::op::kueue
