// The state of a job that goes on (status.state and its conditions): Restarting while failed pods
// are recreated, Queued while its queue holds it, Running once every pod exists and one runs,
// else Created. The states that end a job are job_end.h's; Suspended is suspend.h's.
#pragma once

#include <optional>

#include "api/job.h"
#include "cifartrainjob/kueue_integration.h"
#include "cifartrainjob/plan.h"
#include "cifartrainjob/replica_tally.h"
#include "framework/clock.h"

namespace cifar::op {

// Sets the state after this round's creates and restarts. Created is announced once, with an
// Event, when the job's pods are first created; entering the queue, or a new reason for waiting
// there, with an Event; leaving it (Queued False, JobAdmitted) with the time it waited.
// `restarting`: this round recreates pods (its last Event says why); `queued`: queue_wait's.
void set_progressing_state(const Job& job, const ReplicaTally& tally, bool restarting,
                           const std::optional<QueueWait>& queued, Clock::time_point now,
                           Plan& plan);

}  // namespace cifar::op
