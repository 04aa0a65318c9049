// An elastic job's own part of the replicas phase (replicas.h; docs/ARCHITECTURE.md, "Elastic
// jobs"): its rendezvous store, kept, and the workers beyond its desired size, asked to leave.
// Its missing workers are created like any replica's (replica_tally.h), so a scale-up and a lost
// worker's replacement need nothing here.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "api/job.h"
#include "cifartrainjob/plan.h"
#include "framework/node_status.h"
#include "framework/pod_status.h"

namespace cifar::op {

// Creates the job's rendezvous store when it has none, and deletes one that failed (evicted, say:
// a pod with restartPolicy Always fails only so) to create it again. Nothing for a fixed job.
void keep_rendezvous_store(const Job& job, const PodsByName& pods, Plan& plan);

// Deletes the workers whose index is at or above the desired size (Worker.replicas): the highest
// go first, each stopping at a step boundary as any stopped pod does (the runtime's SIGTERM
// path), with an Event; not charged to backoffLimit. Nothing for a fixed job.
void retire_surplus_workers(const Job& job, const PodsByName& pods, Plan& plan);

// plan.status.workers: the workers training against the desired size. An elastic job's training
// are its world's (status.progress.world, the workers of the newest round) once one was reported;
// before, and for a fixed job, the workers whose pod is ready (of any index: a leaving one still
// trains until it stops). `waiting_for_admission` (kueue_integration.h): the workers Kueue has not
// admitted, with why; while there are any the reason is WaitingForAdmission, the message names
// them, and an Event says so as they start waiting. An elastic job that trained and has fewer
// workers running than minReplicas has reason BelowMinimum, said by a Warning Event as it starts.
void count_workers(const Job& job, const PodsByName& pods,
                   const std::map<int, std::string>& waiting_for_admission, Plan& plan);

// An elastic job whose world changed from the one in `progress_before` (the status.progress read
// before this round) to plan.status.progress's: a Normal Event WorldChanged naming who joined and
// who left, and why, at which step, and how many train now ("grow-worker-2 joined at step 812: 3
// trainers"; "grow-worker-1 left (its node n2 was lost) at step 640: 2 trainers"). Nothing when
// the same workers form a new round (a store restarted, a frozen rank came back).
void report_world_change(const Job& job, const nlohmann::json& progress_before,
                         const PodsByName& pods, const NodeTroubles& troubled_nodes, Plan& plan);

}  // namespace cifar::op
