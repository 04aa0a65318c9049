// An elastic job's own part of the replicas phase (replicas.h; docs/ARCHITECTURE.md, "Elastic
// jobs"): its rendezvous store, kept, and the workers beyond its desired size, asked to leave.
// Its missing workers are created like any replica's (replica_tally.h), so a scale-up and a lost
// worker's replacement need nothing here.
#pragma once

#include "api/job.h"
#include "cifartrainjob/plan.h"
#include "framework/pod_status.h"

namespace cifar::op {

// Creates the job's rendezvous store when it has none, and deletes one that failed (evicted, say:
// a pod with restartPolicy Always fails only so) to create it again. Nothing for a fixed job.
void keep_rendezvous_store(const Job& job, const PodsByName& pods, Plan& plan);

// Deletes the workers whose index is at or above the desired size (Worker.replicas): the highest
// go first, each stopping at a step boundary as any stopped pod does (the runtime's SIGTERM
// path), with an Event; not charged to backoffLimit. Nothing for a fixed job.
void retire_surplus_workers(const Job& job, const PodsByName& pods, Plan& plan);

// status.workers: the workers whose pod is ready (of any index: a leaving one still trains until
// it stops), against the desired size.
void count_workers(const Job& job, const PodsByName& pods, JobStatus& status);

}  // namespace cifar::op
