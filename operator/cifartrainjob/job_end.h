// The end of a job, and what follows it: the final state with its completion time, final progress
// and Event (finish, which every phase that ends the job calls), then its pods' cleanup under
// cleanPodPolicy and its deletion after ttlSecondsAfterFinished (the finished phase).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "api/job.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"

namespace cifar::op {

// Ends the job as Succeeded or Failed: the state, completionTime, the final progress, an Event,
// its pods' cleanup and the requeue for its TTL. A round that ends the job creates nothing.
void finish(const Job& job, const PodsByName& pods, bool succeeded, std::string_view reason,
            const std::string& message, Clock::time_point now, Plan& plan);

// Fails the job BackoffLimitExceeded ("restarted 4 times, more than backoffLimit 3" and `why`),
// deleting nothing more: the round's restart was one too many.
void fail_past_backoff_limit(const Job& job, const PodsByName& pods, int64_t restarts,
                             const std::string& why, Clock::time_point now, Plan& plan);

// The finished phase: a Succeeded or Failed job gets its pods' cleanup and its TTL, nothing else
// (kDone); any other job goes on to the next phase.
PhaseResult reconcile_finished(const JobSpec& spec, const PodsByName& pods, Clock::time_point now,
                               Plan& plan);

}  // namespace cifar::op
