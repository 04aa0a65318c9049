// A job whose checkpoint store does not answer (refusing connections, silent, failing DNS, 5xx):
// its chief trains on and keeps the newest checkpoint waiting (runtime: storage/retrying_store.h),
// and says since when on its metrics, which status.progress.checkpoint carries. Reported while the
// job goes on (condition CheckpointStoreUnreachable and an Event); a store away for longer than
// checkpoint.maxUnsavedSeconds ends the job through its chief (CheckpointStoreUnavailable).
#pragma once

#include "api/job.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"

namespace cifar::op {

// Condition CheckpointStoreUnreachable True ("the checkpoint store has not answered since T ...",
// reason StoreNotAnswering) with a Warning Event when that is news, and False with a Normal Event
// once it answers again. Nothing while the chief says nothing.
void report_store_outage(const Job& job, Clock::time_point now, Plan& plan);

}  // namespace cifar::op
