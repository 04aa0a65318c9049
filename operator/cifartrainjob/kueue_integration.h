// The one seam between a CifarTrainJob and Kueue (framework/kueue.h has Kueue's side: its labels,
// gate, finalizer and Workload), as Kueue's jobframework integrations are: a job with a queue
// (runPolicy.schedulingPolicy.queue) is a Kueue plain pod group. Here: the group's name and its
// inverse (a Workload's job), what the job's pods carry to join the group, why the job waits in
// its queue (Kueue's reasons, its preemption and the readmission after it), and what the job does
// for Kueue's finalizer and the Workload of an admission that ended.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/job.h"
#include "api/status.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"
#include "framework/kueue.h"
#include "framework/node_status.h"

namespace cifar::op {

// The Kueue pod group of a job with a queue: "<job>-<first 8 characters of its uid>" (at most 60
// characters: job names are at most 51). Its Workload has this name. A job deleted and applied
// again under its name is a new group, never counted to the old one's Workload.
std::string pod_group_name(const Job& job);
// The inverse: the name of the job whose pod group (and Workload) is `group`, nullopt for a name
// pod_group_name does not make. From the name alone, so also once the group's pods are gone.
std::optional<std::string> job_name_of_pod_group(std::string_view group);

// Makes a pod of a job with a queue one of its pod group: the queue's and the group's labels, the
// group's size, and the job's topology request (JobSpec::topology) for Kueue's Topology Aware
// Scheduling.
void join_pod_group(const Job& job, nlohmann::json& pod_metadata);

// Why a job with a queue waits, its state Queued with this reason and message: some of its pods
// are gated until Kueue admits its group (Kueue's reason and message; WaitingForWorkload before
// Kueue made the Workload), Kueue evicted the group and it waits to be admitted again (Preempted,
// kept until then), or the Workload of an admission that ended is still there (Requeuing: it is
// deleted, and no pod is created until it is gone, or Kueue would count the new pods to it).
// nullopt: the job has no queue, or its group is admitted.
struct QueueWait {
  std::string reason;
  std::string message;
  bool blocks_creates = false;  // the Workload of an ended admission is still there
};
std::optional<QueueWait> queue_wait(const Job& job, const PodsByName& pods,
                                    const Observed& observed, const JobStatus& status);

// Kueue's preemption and the readmission after it. Kueue evicted the group (preempted it, or
// evicted it for another reason) if its Workload says so, or the pods it stops do (they outlive a
// Workload that ends as they do): the eviction's reason (Preempted, Evicted, or the Workload's)
// and Kueue's message; nullopt if not.
std::optional<QueueWait> find_eviction(const kueue::WorkloadState* workload,
                                       const PodsByName& pods);
// A preempted job stays Preempted until Kueue admits it again, through its Workload's end and its
// new pods' wait: `wait` keeps the reason Preempted while the job's Queued condition has it.
void stay_preempted_until_readmitted(const JobStatus& status, QueueWait& wait);
// The Workload of the group's last admission goes before the pods come back (once the cache knows
// it); the job looks again for its deletion, which queues the job too.
void delete_ended_workload(const Job& job, const Observed& observed, Plan& plan);

// A queue is named but Kueue did not take a pod (its webhook did not label it): Kueue is not
// installed with its pod integration, or its managedJobsNamespaceSelector leaves the namespace
// out. The pods then run without waiting for admission; condition Queued False says so, with an
// Event the first time.
void note_unqueued_pods(const Job& job, const PodsByName& pods, Clock::time_point now, Plan& plan);

// Kueue's finalizer holds a pod of a group until Kueue sees a replacement or the group end; the
// job replaces a pod under its own name, which cannot be created while the old one is there. So a
// pod that is leaving (deleted, or deleted this round) and has ended (failed, succeeded, or on a
// lost node, where nothing can end it) is released (plan.release_pods).
void release_leaving_pods(const PodsByName& pods, const NodeTroubles& troubled, Plan& plan);

}  // namespace cifar::op
