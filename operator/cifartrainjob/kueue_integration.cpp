#include "cifartrainjob/kueue_integration.h"

#include <algorithm>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/node_loss.h"
#include "framework/pod_status.h"

namespace cifar::op {

using nlohmann::json;

namespace {

constexpr size_t kUidPrefix = 8;             // of the job's uid, in its group's name
constexpr size_t kWorkerUidPrefix = 6;       // in the name of an elastic worker's own group
constexpr size_t kMaxWorkerIndexDigits = 4;  // maxReplicas <= 1024

bool all_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The pods of the job's own group: all of a fixed job's; an elastic job's others (an all-reduce
// job's rendezvous store among them) and its workers up to minReplicas.
int main_group_size(const JobSpec& spec) {
  if (!spec.elastic()) return pod_count(spec);
  return pod_count(spec) - spec.count(Role::kWorker) +
         spec.replicas.at(Role::kWorker).min_replicas + (spec.elastic_allreduce() ? 1 : 0);
}

// The index of `pod` if it is a worker in a pod group of its own (above the minimum).
std::optional<int> own_group_worker(const JobSpec& spec, const json& pod) {
  if (pod_role(pod) != Role::kWorker) return std::nullopt;
  const auto index = pod_index(pod);
  return index && in_own_pod_group(spec, *index) ? index : std::nullopt;
}

PodsByName pods_of_group(const PodsByName& pods, const std::string& group) {
  PodsByName of_group;
  for (const auto& [name, pod] : pods) {
    const auto labels = pod.value("metadata", json::object()).value("labels", json::object());
    if (labels.value(std::string(kueue::kPodGroupNameLabel), "") == group) {
      of_group.emplace(name, pod);
    }
  }
  return of_group;
}

}  // namespace

std::string pod_group_name(const Job& job) {
  return job.name + "-" + job.uid.substr(0, kUidPrefix);
}

std::string worker_pod_group_name(const Job& job, int index) {
  return job.name + "-" + job.uid.substr(0, kWorkerUidPrefix) + "-" + std::to_string(index);
}

bool in_own_pod_group(const JobSpec& spec, int index) {
  return spec.elastic() && index >= spec.replicas.at(Role::kWorker).min_replicas;
}

std::optional<std::string> job_name_of_pod_group(std::string_view group) {
  // The last part tells the two apart: a uid's prefix of 8 characters, or a worker's index.
  const auto dash = group.rfind('-');
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  const auto last = group.substr(dash + 1);
  if (last.size() == kUidPrefix) return std::string(group.substr(0, dash));
  if (last.size() > kMaxWorkerIndexDigits || !all_digits(last)) return std::nullopt;
  const auto rest = group.substr(0, dash);
  const auto uid_dash = rest.rfind('-');
  if (uid_dash == std::string_view::npos || uid_dash == 0 ||
      rest.size() - uid_dash - 1 != kWorkerUidPrefix) {
    return std::nullopt;
  }
  return std::string(rest.substr(0, uid_dash));
}

void join_pod_group(const Job& job, std::optional<int> worker_index, json& pod_metadata) {
  // A Kueue pod group, admitted whole or not at all. Not retriable in the group: Kueue ends
  // the group, and gives its quota back, once none of its pods is left to run (the job ended,
  // failed, was deleted, suspended or preempted; an elastic worker left), instead of holding the
  // quota for replacements until all of them succeeded; a pod the operator recreates while the
  // job runs still joins the admitted group.
  const bool own = worker_index && in_own_pod_group(job.spec, *worker_index);
  const auto group = own ? worker_pod_group_name(job, *worker_index) : pod_group_name(job);
  auto& metadata = pod_metadata;
  metadata["labels"][std::string(kueue::kQueueNameLabel)] = job.spec.queue;
  metadata["labels"][std::string(kueue::kPodGroupNameLabel)] = group;
  if (!metadata.contains("annotations")) metadata["annotations"] = json::object();
  metadata["annotations"][std::string(kueue::kPodGroupTotalCountAnnotation)] =
      std::to_string(own ? 1 : main_group_size(job.spec));
  metadata["annotations"][std::string(kueue::kRetriableInGroupAnnotation)] = "false";
  if (const auto& topology = job.spec.topology) {
    auto& annotations = metadata["annotations"];
    annotations[std::string(topology->required ? kueue::kPodSetRequiredTopologyAnnotation
                                               : kueue::kPodSetPreferredTopologyAnnotation)] =
        topology->level;
    annotations[std::string(kueue::kPodSetGroupNameAnnotation)] = group;
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
  // The job waits for its own group; an elastic job's workers above the minimum wait on their own
  // (workers_waiting_for_admission) while it trains.
  const auto group_pods = spec.elastic() ? pods_of_group(pods, group) : pods;
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
  for (const auto& [name, pod] : group_pods) {
    if (pod_terminating(pod)) continue;
    any_pod = true;
    gated = gated || pod_gated(pod);
  }
  const std::string in_queue = "in queue " + spec.queue;
  const auto evicted = find_eviction(workload, group_pods);
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
                   std::to_string(main_group_size(spec)) + " pods, " +
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
    plan.delete_workloads.push_back(pod_group_name(job));
  }
  look_again_in(plan, std::chrono::seconds(5));  // its deletion, seen by the cache, queues the job
}

std::map<int, std::string> workers_waiting_for_admission(const Job& job, const PodsByName& pods,
                                                         const Observed& observed) {
  std::map<int, std::string> waiting;
  if (job.spec.queue.empty() || !job.spec.elastic()) return waiting;
  for (const auto& [name, pod] : pods) {
    const auto index = own_group_worker(job.spec, pod);
    if (!index || pod_terminating(pod) || !pod_gated(pod)) continue;
    const auto group = worker_pod_group_name(job, *index);
    const auto workload = observed.worker_workloads.find(*index);
    std::string why;
    if (workload == observed.worker_workloads.end()) {
      why = "Kueue has not made the Workload of its group " + group + " yet";
    } else if (workload->second.quota_reserved) {
      why = "Kueue reserved quota for its group " + group + "; waiting for its admission checks";
    } else {
      why = "its group " + group + " waits: " +
            (workload->second.waiting_message.empty() ? "Kueue has not tried to admit it yet"
                                                      : workload->second.waiting_message);
    }
    waiting.emplace(*index, why);
  }
  return waiting;
}

std::optional<Time> group_admitted_since(const Job& job, const json& pod,
                                         const Observed& observed) {
  if (const auto index = own_group_worker(job.spec, pod)) {
    const auto workload = observed.worker_workloads.find(*index);
    return workload == observed.worker_workloads.end() ? std::nullopt
                                                       : workload->second.admitted_since;
  }
  return observed.workload ? observed.workload->admitted_since : std::nullopt;
}

bool waits_for_the_jobs_admission(const JobSpec& spec, int index,
                                  const std::optional<QueueWait>& queued) {
  return queued && !spec.queue.empty() && in_own_pod_group(spec, index);
}

void remove_workers_of_a_queued_job(const Job& job, const PodsByName& pods,
                                    const std::optional<QueueWait>& queued, Plan& plan) {
  for (const auto& [name, pod] : pods) {
    const auto index = own_group_worker(job.spec, pod);
    if (!index || pod_terminating(pod) || !waits_for_the_jobs_admission(job.spec, *index, queued) ||
        listed(plan.delete_pods, name)) {
      continue;
    }
    plan.delete_pods.push_back(name);
    plan.events.push_back({"Normal", std::string(reason::kWorkerLeaving),
                           "worker " + name +
                               " leaves until the job's own group is admitted again (" +
                               queued->reason + "); it comes back then"});
  }
}

bool worker_waits_for_its_ended_workload(const Job& job, int index, const Observed& observed,
                                         Plan& plan) {
  if (job.spec.queue.empty() || !in_own_pod_group(job.spec, index)) return false;
  const auto workload = observed.worker_workloads.find(index);
  if (workload == observed.worker_workloads.end()) return false;
  const auto& state = workload->second;
  if (!state.finished && !state.deleting) return false;
  if (!state.deleting) plan.delete_workloads.push_back(worker_pod_group_name(job, index));
  look_again_in(plan, std::chrono::seconds(5));  // its deletion, seen by the cache, queues the job
  return true;
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
