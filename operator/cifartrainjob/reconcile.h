// The reconcile function: from a job (spec and last status) and what is observed (its pods, its
// Service, its pods' nodes' health) to what should be done (objects to create and delete, the new
// status, when to look again). Pure: no server, no clock of its own; the apply layer (controller.h)
// carries it out.
//
// Lifecycle rules:
// - restartPolicy Never: a failed pod fails the job. OnFailure: the kubelet restarts containers
//   in place (their restartCount is counted); a pod that fails anyway (evicted) is recreated.
//   ExitCode: exit codes >= 128 (signals, OOM kills) are retryable and the pod is recreated,
//   1-127 are permanent and fail the job.
// - backoffLimit bounds status.restarts (pods recreated, kept in the status, so a recreated pod
//   still counts) plus the in-place restarts of the pods that exist.
// - The job succeeds when its chief succeeds: the master, or worker 0 without a master. The
//   evaluator never decides success; a failed PS is handled like any other replica.
// - activeDeadlineSeconds from status.startTime fails the job (a requeue fires at the deadline);
//   ttlSecondsAfterFinished deletes a finished job; cleanPodPolicy says which pods a finished job
//   deletes (All, Running: those still pending or running, None).
// - suspend deletes the pods and keeps the job (condition Suspended); resuming creates them anew.
// - A job's success waits for its evaluator's final evaluation (bounded); a finished job's
//   status.progress has the final figures from its pods' termination messages.
// - What holds a pod back is reported (condition PodsNotReady, status.reason/message, an Event):
//   a pod that has not started runPolicy.startupDeadlineSeconds after its creation, or that is
//   still terminating runPolicy.terminatingDeadlineSeconds after its grace period, fails the job;
//   a waiting reason that cannot heal (InvalidImageName) fails it at once.
// - A pod on a node that is not Ready is reported (PodsNotReady, NodeLost). If the node is lost
//   (its kubelet stopped answering, Ready Unknown: nothing there can confirm the pod's end, so it
//   would stay Terminating for good; or it is tainted out-of-service), the pod is deleted for good
//   once the node has been so runPolicy.nodeFailureGraceSeconds (at once if out of service) and
//   created again on a live node, while the job runs (not while it is suspended or finished).
//   Not counted against backoffLimit: a node failure is not the job's fault (peers whose
//   collective broke with it restart in place, and those restarts count). A Succeeded pod stays.
// - A round that ends the job creates nothing.
// - A job with a queue (runPolicy.schedulingPolicy.queue) is a Kueue pod group: its pods are made
//   as always, Kueue's webhook gates them, and Kueue admits them all at once when its quota
//   allows. While any pod is gated, or after Kueue evicted the group (preemption) until it is
//   admitted again, the job is Queued with Kueue's reason and message; its startTime (and so
//   activeDeadlineSeconds) and its pods' startup deadlines count from the admission. Pods Kueue
//   deletes are not failures: they come back when the cache shows them gone, not counted against
//   backoffLimit. A Workload that ended is deleted before the pods are made again.
// - Identity: a job acts only on objects it controls (its UID in their controller owner
//   reference). A pod of its name that it does not control is reported (PodsNotReady, NotOwned)
//   and its name not created until it is gone; the same for the Service and NetworkPolicy, which
//   the apply layer finds when their create meets an object that is not the job's.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/job.h"
#include "api/status.h"
#include "framework/clock.h"
#include "framework/kueue.h"
#include "framework/node_status.h"

namespace cifar::op {

struct Observed {
  std::vector<nlohmann::json> pods;  // the job's pods: its label, and this job as controller
  // Pods with the job's label that this job does not control (an orphan of an earlier job of the
  // same name, a user's own pod), by name: never adopted, and a name they hold is not created.
  std::map<std::string, std::string> foreign_pods;  // name -> who controls it
  bool service_exists = false;
  // The progress scraper's newest status.progress for the job (progress.h), if it has one: the
  // reconcile writes it, so that the status has one writer.
  std::optional<nlohmann::json> progress;
  // The nodes of the job's pods that are in trouble (not Ready, or out of service), by name.
  NodeTroubles troubled_nodes;
  // A job with a queue: the Kueue Workload of its pod group, if there is one; `workload_known` is
  // false until the cache of Workloads has synced (nothing is decided from its absence before).
  std::optional<kueue::WorkloadState> workload;
  bool workload_known = true;
};

struct EventRecord {
  std::string type;  // Normal | Warning
  std::string reason;
  std::string message;
};

struct Plan {
  // The job's own objects, made once, before its pods: the token Secret (its random value is the
  // apply layer's), the NetworkPolicy, then the headless Service, whose existence says all three
  // were made.
  bool create_token_secret = false;
  std::optional<nlohmann::json> create_network_policy;
  std::optional<nlohmann::json> create_service;
  std::vector<nlohmann::json> create_pods;
  std::vector<std::string> delete_pods;  // names
  // Pods on a lost node, deleted for good (grace period 0): the API server forgets them at once,
  // without their node's word. Recreated in a later round, once the cache shows them gone.
  std::vector<std::string> force_delete_pods;
  // Pods the operator replaces under their own name whose Kueue finalizer it takes off: Kueue holds
  // a failed pod of a group until a replacement appears, and the replacement, of the same name,
  // cannot be created while it is there.
  std::vector<std::string> release_pods;
  // The Kueue Workload of an admission that ended (the group was preempted, suspended, or all its
  // pods ended): deleted before the pods are created again, which then queue as a new group.
  std::optional<std::string> delete_workload;
  JobStatus status;  // the job's whole new status
  // The restarts backoffLimit counts: status.restarts plus the in-place restarts of the pods that
  // exist (for the operator's metrics; a job that cannot run has its status.restarts).
  int64_t restarts = 0;
  bool delete_job = false;  // ttlSecondsAfterFinished has passed
  std::optional<std::chrono::seconds> requeue_after;
  std::vector<EventRecord> events;
};

// The phases (reconcile_phases.h) in order: finished, suspended, deadline, replicas.
Plan reconcile(const Job& job, const JobStatus& status, const Observed& observed,
               Clock::time_point now);

// A job that cannot run: condition Failed with `reason` and `message`, a Warning Event, nothing
// created. For a spec that parse_spec refused (reason InvalidSpec), and for an object that the
// API server refused for good (a 4xx other than conflict and throttling: reason
// CreateRejected, the server's message), which retrying could never change.
Plan reconcile_failed(const JobStatus& status, std::string_view reason, const std::string& message,
                      Clock::time_point now);

// A create the apply layer could not make and retries: refused for now by the API server (a quota
// exceeded, a namespace's service account not made yet: reason FailedCreate), or blocked by an
// object of the same name that the job does not control (reason NotOwned). Condition PodsNotReady
// with the reason and message, and a Warning Event when that is news.
void note_blocked_create(Plan& plan, std::string_view reason, const std::string& message,
                         Clock::time_point now);

}  // namespace cifar::op
