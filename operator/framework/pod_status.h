// What a pod's status says, read from the pod as the API server returns it (any pod: nothing
// here knows which controller made it).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "framework/clock.h"

namespace cifar::op {

// status.phase, read once and compared as an enum past here.
enum class PodPhase { kPending, kRunning, kSucceeded, kFailed, kUnknown };
// "Pending", "Running", "Succeeded", "Failed", "Unknown". No phase yet ("": the API server has
// not written the status) is Pending, the phase it starts with; a name this version does not
// know is Unknown, which nothing here acts on.
PodPhase parse_pod_phase(std::string_view name);
std::string_view pod_phase_name(PodPhase phase);
PodPhase pod_phase(const nlohmann::json& pod);
bool pod_terminating(const nlohmann::json& pod);  // has a deletionTimestamp
std::string pod_node(const nlohmann::json& pod);  // spec.nodeName: "" until it is scheduled
// The exit code of the pod's (first) container that terminated, now or in its last run.
std::optional<int> pod_exit_code(const nlohmann::json& pod);
// The exit code of the (first) container's run before its latest in-place restart, if any.
std::optional<int> pod_exit_code_before_restart(const nlohmann::json& pod);
// How the pod's (first) container ended, if it has ended now (an earlier run's end does not
// count): its exit code and the runtime's reason ("Error", "OOMKilled", "Completed").
struct ContainerEnd {
  int exit_code = 0;
  std::string reason;
};
std::optional<ContainerEnd> pod_container_ended(const nlohmann::json& pod);
int pod_restarts(const nlohmann::json& pod);  // its containers' in-place restarts
bool pod_ready(const nlohmann::json& pod);    // condition Ready is True

// What holds a pod back, in the scheduler's or the kubelet's words: a pod the scheduler cannot
// place (PodScheduled False: Unschedulable, with "0/2 nodes are available: ..."), or a container
// waiting for anything but its normal start (ErrImagePull, ImagePullBackOff,
// CreateContainerConfigError, CrashLoopBackOff, ...). nullopt for a pod on its way (being
// scheduled, ContainerCreating) or one held by a scheduling gate (a queue's, not a fault).
struct PodWaiting {
  std::string reason;
  std::string message;
};
std::optional<PodWaiting> pod_waiting(const nlohmann::json& pod);
// Whether a scheduling gate holds the pod (a queue's, e.g. Kueue's, until it admits the pod).
bool pod_gated(const nlohmann::json& pod);
// Whether any container of the pod has ever run (running, terminated, or restarted).
bool pod_started(const nlohmann::json& pod);
std::optional<Time> pod_created_at(const nlohmann::json& pod);  // metadata.creationTimestamp
// metadata.deletionTimestamp: when a deleted pod's grace period ends.
std::optional<Time> pod_deletion_due(const nlohmann::json& pod);
// When its (first) container terminated, and the message it left (its termination log, or the
// end of its log where terminationMessagePolicy falls back to it).
std::optional<Time> pod_finished_at(const nlohmann::json& pod);
std::string pod_termination_message(const nlohmann::json& pod);
// When its (first) container's current run started; nullopt unless it is running.
std::optional<Time> pod_running_since(const nlohmann::json& pod);

// Keeps of a pod's status only what the readers above read: the phase and why it ended, its
// address (the progress scrape), the conditions PodScheduled and Ready, and its containers'
// names, states and restarts; not its other addresses, QoS class, images, or the conditions'
// probe times. For a cache of a fleet's pods: a running pod keeps 53 of its 73 JSON members, and
// every reader answers alike on the trimmed status (pod_status_test). A reader of another field
// keeps it here.
void trim_pod_status(nlohmann::json& status);

}  // namespace cifar::op
