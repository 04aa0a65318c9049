// The one seam between a CifarTrainJob and Kueue (framework/kueue.h has Kueue's side: its labels,
// gate, finalizer and Workload), as Kueue's jobframework integrations are: a job with a queue
// (runPolicy.schedulingPolicy.queue) is a Kueue plain pod group. Here: the group's name and its
// inverse (a Workload's job), what the job's pods carry to join the group, why the job waits in
// its queue (Kueue's reasons, its preemption and the readmission after it), and what the job does
// for Kueue's finalizer and the Workload of an admission that ended.
#pragma once

#include <map>
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
//
// An elastic job is more than one group (docs/ARCHITECTURE.md, "Elastic jobs"): Kueue v0.17
// admits a plain pod group of a fixed size, so this group is the part that never changes (its
// rendezvous store and its first minReplicas workers), admitted all or nothing, and each worker
// above the minimum is a group of one of its own (worker_pod_group_name), admitted when the quota
// has room for it while the others train, and ended, its quota given back, when it leaves.
std::string pod_group_name(const Job& job);
// The group of elastic worker `index` (>= minReplicas): "<job>-<first 6 characters of its
// uid>-<index>", at most 63 characters (a label value's limit) for a 51-character job name and
// index 1023 (maxReplicas is at most 1024).
std::string worker_pod_group_name(const Job& job, int index);
// Whether worker `index` of the job is a group of its own (an elastic job's, above minReplicas).
bool in_own_pod_group(const JobSpec& spec, int index);
// The inverse of both: the name of the job whose pod group (and Workload) is `group`, nullopt for
// a name they do not make. From the name alone, so also once the group's pods are gone.
std::optional<std::string> job_name_of_pod_group(std::string_view group);

// Makes a pod of a job with a queue one of its pod groups (`worker_index`: a worker's index, for
// an elastic job's worker above the minimum; nullopt for any other pod): the queue's and the
// group's labels, the group's size, and the job's topology request (JobSpec::topology) for
// Kueue's Topology Aware Scheduling.
void join_pod_group(const Job& job, std::optional<int> worker_index, nlohmann::json& pod_metadata);

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

// The workers of an elastic job above minReplicas that wait for Kueue to admit them, by index,
// with Kueue's why: their pods are gated while the others train. Empty when none waits.
std::map<int, std::string> workers_waiting_for_admission(const Job& job, const PodsByName& pods,
                                                         const Observed& observed);
// When Kueue admitted `pod`'s group (the job's, or an elastic worker's own), if it did.
std::optional<Time> group_admitted_since(const Job& job, const nlohmann::json& pod,
                                         const Observed& observed);
// An elastic job's workers above the minimum are made only once the job's own group is admitted:
// made with it, Kueue may admit one of them first, with quota the job's group then lacks, and
// the worker, which cannot train without the others, holds what they wait for (seen on the
// cluster). So while the job waits in its queue (`queued`, queue_wait's) they are not made.
bool waits_for_the_jobs_admission(const JobSpec& spec, int index,
                                  const std::optional<QueueWait>& queued);
// For the same reason, those there go while the job waits in its queue again (Kueue evicted its
// group: they have nobody to train with); they come back once it is admitted.
void remove_workers_of_a_queued_job(const Job& job, const PodsByName& pods,
                                    const std::optional<QueueWait>& queued, Plan& plan);
// The group of an elastic job's worker `index` ended an admission and its Workload is still
// there (the worker left, failed or was preempted): it is deleted (plan.delete_workloads) and the
// worker is not created again until it is gone, so that it queues as a new group. True while the
// worker's pod must wait for that.
bool worker_waits_for_its_ended_workload(const Job& job, int index, const Observed& observed,
                                         Plan& plan);

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
