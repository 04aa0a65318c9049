// The job's clock: status.startTime, set on the first round the job may run, and
// activeDeadlineSeconds counted from it. A job waiting in its queue has no clock yet: it starts
// when Kueue admits the job (kueue_integration.h).
#pragma once

#include "api/job.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"

namespace cifar::op {

// The deadline phase: fails the job past activeDeadlineSeconds (kDone), else asks to look again
// at the deadline. `queued`: the job waits in its queue (queue_wait): its clock stands (startTime
// is cleared, the deadline counts from the admission).
PhaseResult reconcile_deadline(const Job& job, const PodsByName& pods, Clock::time_point now,
                               Plan& plan, bool queued = false);

}  // namespace cifar::op
