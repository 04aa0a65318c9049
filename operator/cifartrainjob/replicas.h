// The replicas phase, the last of a round that goes on (reconcile.h): the job's own objects and
// its pods. The chief's success (chief_success.h), the pods on lost nodes (node_loss.h), the
// missing pods created (unless the queue blocks them, kueue_integration.h), failed pods restarted
// or the job failed under its restartPolicy and backoffLimit (replica_tally.h), the state that
// follows (job_state.h), and what holds its pods back (holdups.h).
#pragma once

#include <optional>

#include "api/job.h"
#include "cifartrainjob/kueue_integration.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"

namespace cifar::op {

// `observed`: besides the pods, the pods of the job's names it does not control, whether its
// Service exists, its pods' nodes in trouble and its queue's Workload; `queued`: queue_wait's.
void reconcile_replicas(const Job& job, const PodsByName& pods, const Observed& observed,
                        Clock::time_point now, Plan& plan,
                        const std::optional<QueueWait>& queued = std::nullopt);

}  // namespace cifar::op
