// The reconcile function: from a job (spec and last status) and what is observed (its pods, its
// Service, its pods' nodes' health, its queue's Workload: Observed, plan.h) to what should be done
// (objects to create and delete, the new status, when to look again: Plan). Pure: no server, no
// clock of its own; the apply layer (applier.h) carries it out.
//
// Lifecycle rules:
// - restartPolicy Never: a failed pod fails the job. OnFailure: the kubelet restarts containers
//   in place (their restartCount is counted); a pod that fails anyway (evicted) is recreated.
//   ExitCode: exit codes >= 128 (signals, OOM kills) are retryable and the pod is recreated,
//   1-127 are permanent and fail the job.
// - backoffLimit bounds status.restarts: the in-place restarts of the job's pods and their
//   recreations after failures, charged to each pod in the status so that they still count once
//   the pod is gone (restart_count.h).
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
//   Not counted against backoffLimit: a node failure is not the job's fault (the in-place
//   restarts the pod had before are kept). A Succeeded pod stays.
// - A round that ends the job creates nothing.
// - A job with a queue (runPolicy.schedulingPolicy.queue) is a Kueue pod group: its pods are made
//   as always, Kueue's webhook gates them, and Kueue admits them all at once when its quota
//   allows. While any pod is gated, or after Kueue evicted the group (preemption) until it is
//   admitted again, the job is Queued with Kueue's reason and message; its startTime (and so
//   activeDeadlineSeconds) and its pods' startup deadlines count from the admission. Pods Kueue
//   deletes are not failures: they come back when the cache shows them gone, not counted against
//   backoffLimit. A Workload that ended is deleted before the pods are made again.
// - A Running job none of whose trainers progressed for their stall limit (each trainer's
//   watchdog says so, or it stopped answering) is Stalled, and runPolicy.onStall says what follows:
//   its stalled pods replaced (charged to backoffLimit), the job failed, or a report (stall.h).
// - Identity: a job acts only on objects it controls (its UID in their controller owner
//   reference). A pod of its name that it does not control is reported (PodsNotReady, NotOwned)
//   and its name not created until it is gone; the same for the Service and NetworkPolicy, which
//   the apply layer finds when their create meets an object that is not the job's.
#pragma once

#include <string>
#include <string_view>

#include "api/job.h"
#include "api/status.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"

namespace cifar::op {

// The phases in order, each of which may end the round: finished (job_end.h), suspended
// (suspend.h), deadline (active_deadline.h), replicas (replicas.h); queue_wait
// (kueue_integration.h) first says whether the job waits in its queue.
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
