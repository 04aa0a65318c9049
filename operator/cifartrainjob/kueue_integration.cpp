#include "cifartrainjob/kueue_integration.h"

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/node_loss.h"
#include "framework/pod_status.h"

namespace cifar::op {

using nlohmann::json;

namespace {

constexpr size_t kUidPrefix = 8;  // of the job's uid, in its group's name

}  // namespace

std::string pod_group_name(const Job& job) {
  return job.name + "-" + job.uid.substr(0, kUidPrefix);
}

std::optional<std::string> job_name_of_pod_group(std::string_view group) {
  constexpr size_t kSuffix = 1 + kUidPrefix;  // "-" and the uid's prefix
  if (group.size() <= kSuffix || group[group.size() - kSuffix] != '-') return std::nullopt;
  return std::string(group.substr(0, group.size() - kSuffix));
}

void join_pod_group(const Job& job, json& pod_metadata) {
  // One Kueue pod group, admitted whole or not at all. Not retriable in the group: Kueue ends
  // the group, and gives its quota back, once none of its pods is left to run (the job ended,
  // failed, was deleted, suspended or preempted), instead of holding the quota for replacements
  // until all of them succeeded; a pod the operator recreates while the job runs still joins
  // the admitted group.
  auto& metadata = pod_metadata;
  metadata["labels"][std::string(kueue::kQueueNameLabel)] = job.spec.queue;
  metadata["labels"][std::string(kueue::kPodGroupNameLabel)] = pod_group_name(job);
  if (!metadata.contains("annotations")) metadata["annotations"] = json::object();
  metadata["annotations"][std::string(kueue::kPodGroupTotalCountAnnotation)] =
      std::to_string(pod_count(job.spec));
  metadata["annotations"][std::string(kueue::kRetriableInGroupAnnotation)] = "false";
  if (const auto& topology = job.spec.topology) {
    auto& annotations = metadata["annotations"];
    annotations[std::string(topology->required ? kueue::kPodSetRequiredTopologyAnnotation
                                               : kueue::kPodSetPreferredTopologyAnnotation)] =
        topology->level;
    annotations[std::string(kueue::kPodSetGroupNameAnnotation)] = pod_group_name(job);
  }
}

std::optional<QueueWait> find_eviction(const kueue::WorkloadState* workload,
                                       const PodsByName& pods) {
  if (workload != nullptr && workload->evicted) {
    return QueueWait{
        workload->eviction_reason == reason::kPreempted || workload->eviction_reason.empty()
            ? std::string(reason::kPreempted)
            : workload->eviction_reason,
        workload->eviction_message};
  }
  for (const auto& [name, pod] : pods) {
    if (const auto message = kueue::eviction_message(pod)) {
      return QueueWait{message->rfind(reason::kPreempted, 0) == 0 ? std::string(reason::kPreempted)
                                                                  : std::string(reason::kEvicted),
                       *message};
    }
  }
  return std::nullopt;
}

void stay_preempted_until_readmitted(const JobStatus& status, QueueWait& wait) {
  const auto* queued = status.condition(ConditionType::kQueued);
  if (queued != nullptr && queued->status == ConditionStatus::kTrue &&
      queued->reason == reason::kPreempted && wait.reason != reason::kPreempted) {
    wait.reason = reason::kPreempted;
    wait.message = "preempted; waiting to be admitted again: " + wait.message;
  }
}

std::optional<QueueWait> queue_wait(const Job& job, const PodsByName& pods,
                                    const Observed& observed, const JobStatus& status) {
  const auto& spec = job.spec;
  if (spec.queue.empty()) return std::nullopt;
  const auto group = pod_group_name(job);
  QueueWait wait;
  if (!observed.workload_known) {
    // Pods made now could join a Workload of an admission that ended, not yet seen.
    wait.reason = reason::kWaitingForWorkload;
    wait.message =
        "waiting to read Kueue's Workloads (kueue.x-k8s.io/v1beta2) before creating "
        "the pods of group " +
        group + ": is Kueue installed?";
    wait.blocks_creates = true;
    return wait;
  }
  const auto* workload = observed.workload ? &*observed.workload : nullptr;
  bool any_pod = false;
  bool gated = false;
  for (const auto& [name, pod] : pods) {
    if (pod_terminating(pod)) continue;
    any_pod = true;
    gated = gated || pod_gated(pod);
  }
  const std::string in_queue = "in queue " + spec.queue;
  const auto evicted = find_eviction(workload, pods);
  if (workload != nullptr && (workload->finished || workload->deleting)) {
    wait.reason = reason::kRequeuing;
    wait.message = "Kueue's Workload " + group + " of the group's last admission ended" +
                   (workload->deleting ? " and is being deleted" : "; deleting it") +
                   ": the pods are created again once it is gone, and queue " + in_queue;
    wait.blocks_creates = true;
  } else if (evicted) {
    wait.message = "its pods are deleted and come back to wait " + in_queue;
  } else if ((!gated && any_pod) || (workload != nullptr && workload->admitted)) {
    return std::nullopt;  // admitted: running, or Kueue is taking the gates off
  } else if (workload == nullptr) {
    wait.reason = reason::kWaitingForWorkload;
    wait.message = "waiting for Kueue to make the Workload of pod group " + group + " (" +
                   std::to_string(pod_count(spec)) + " pods, " +
                   (any_pod ? "gated" : "being created") + ")";
  } else if (!workload->quota_reserved) {
    wait.reason =
        workload->waiting_reason.empty() ? std::string(reason::kPending) : workload->waiting_reason;
    // Before Kueue first tries the Workload its QuotaReserved condition is missing: say so, so
    // that a reader (or a script) tells "not looked at yet" from Kueue's own why.
    wait.message = "pod group " + group + " waits " + in_queue + ": " +
                   (workload->waiting_message.empty() ? "Kueue has not tried to admit it yet"
                                                      : workload->waiting_message);
  } else {
    wait.reason = reason::kQuotaReserved;
    wait.message =
        "Kueue reserved quota for pod group " + group + "; waiting for its admission checks";
  }
  if (evicted) {
    wait.reason = evicted->reason;
    wait.message =
        "Kueue evicted pod group " + group + " (" + evicted->message + "); " + wait.message;
  }
  stay_preempted_until_readmitted(status, wait);
  return wait;
}

void delete_ended_workload(const Job& job, const Observed& observed, Plan& plan) {
  if (observed.workload && observed.workload->finished && !observed.workload->deleting) {
    plan.delete_workload = pod_group_name(job);
  }
  look_again_in(plan, std::chrono::seconds(5));  // its deletion, seen by the cache, queues the job
}

void note_unqueued_pods(const Job& job, const PodsByName& pods, Clock::time_point now, Plan& plan) {
  if (job.spec.queue.empty()) return;
  for (const auto& [name, pod] : pods) {
    if (pod_terminating(pod) || kueue::managed(pod)) continue;
    auto& status = plan.status;
    const auto message = "queue " + job.spec.queue + " is named, but Kueue did not take pod " +
                         name + " (it has no " + std::string(kueue::kManagedLabel) +
                         " label): is Kueue installed with its pod integration, and does its "
                         "managedJobsNamespaceSelector match namespace " +
                         job.namespace_ + "? The pods run without waiting for admission";
    const auto* current = status.condition(ConditionType::kQueued);
    if (current == nullptr || current->reason != reason::kNotManagedByQueue) {
      plan.events.push_back({"Warning", std::string(reason::kNotManagedByQueue), message});
    }
    if (current != nullptr) {
      status.set_condition(ConditionType::kQueued, false, reason::kNotManagedByQueue, message,
                           to_time(now));
    } else {  // listed although it never held: it explains why the job did not queue
      if (!status.conditions) status.conditions.emplace();
      status.conditions->push_back({ConditionType::kQueued, ConditionStatus::kFalse,
                                    std::string(reason::kNotManagedByQueue), message, to_time(now),
                                    to_time(now)});
    }
    if (status.state == ConditionType::kQueued) status.state = ConditionType::kCreated;
    return;
  }
}

void release_leaving_pods(const PodsByName& pods, const NodeTroubles& troubled, Plan& plan) {
  for (const auto& [name, pod] : pods) {
    if (!kueue::holds(pod)) continue;
    const bool forced = listed(plan.force_delete_pods, name);
    const bool leaving = forced || pod_terminating(pod) || listed(plan.delete_pods, name);
    const auto phase = pod_phase(pod);
    const auto* trouble = trouble_of(pod, troubled);
    const bool ended = forced || phase == PodPhase::kFailed || phase == PodPhase::kSucceeded ||
                       (trouble != nullptr && trouble->lost());
    if (leaving && ended) plan.release_pods.push_back(name);
  }
}

}  // namespace cifar::op
