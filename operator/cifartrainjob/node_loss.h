// Pods on a node in trouble. A node that is only not Ready is reported (holdups.h); a lost one
// (its kubelet stopped answering, or it is tainted out of service) can never confirm its pods'
// end, so they would stay Terminating for good: they are deleted for good once the node has been
// lost runPolicy.nodeFailureGraceSeconds (at once if out of service) and created again on a live
// node. Not counted against backoffLimit: a node failure is not the job's fault. Until the job
// trains again, status.nodeLoss keeps the job's REASON at NodeLost (holdups.h).
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "api/job.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"
#include "framework/node_status.h"

namespace cifar::op {

// The trouble of the node a pod is on, if it has any.
const NodeTrouble* trouble_of(const nlohmann::json& pod, const NodeTroubles& troubled);

// "is on node n2, not Ready since 2026-12-01T13:38:20Z (NodeStatusUnknown: Kubelet stopped
// posting node status.)". The same words at every reconcile until the trouble changes (no
// running count), so that a status condition holding them is not written again each time: a
// rack lost at once reconciles its jobs many times over (docs/BENCHMARKS.md, section 21).
std::string describe_trouble(const std::string& node, const NodeTrouble& trouble);

// The pods on a node in trouble that are due to be replaced (runPolicy.nodeFailureGraceSeconds
// after the node stopped being Ready, at once if it is out of service): their names go to
// plan.force_delete_pods with an Event, and are returned; a requeue is asked for the next one.
// A Succeeded pod is left: its work is done.
std::set<std::string> replace_pods_on_lost_nodes(const Job& job, const PodsByName& pods,
                                                 const NodeTroubles& troubled,
                                                 Clock::time_point now, Plan& plan);

// Records this round's `replaced` pods in status.node_loss: their node, and the step the job
// stood at (status.progress.step), both kept from the first replacement until it trains again.
void note_node_loss(const PodsByName& pods, const std::set<std::string>& replaced,
                    Clock::time_point now, JobStatus& status);

// Clears status.node_loss once the job trains again: its step moved from where it stood.
void forget_node_loss_once_training(JobStatus& status);

// "pod j-worker-1 was replaced 12 s ago, after node b was lost; the job has not trained since
// (step 140)"
std::string describe_node_loss(const NodeLoss& loss, Clock::time_point now);

}  // namespace cifar::op
