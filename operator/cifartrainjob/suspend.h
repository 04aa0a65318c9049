// runPolicy.suspend: a suspended job's pods are deleted and the job kept (condition Suspended,
// its clock stopped); clearing suspend resumes it, and its pods are created anew.
#pragma once

#include "api/job.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"

namespace cifar::op {

// The suspended phase: ends the round for a suspended job (kDone); a resumed one goes on.
PhaseResult reconcile_suspended(const JobSpec& spec, const PodsByName& pods, Clock::time_point now,
                                Plan& plan);

}  // namespace cifar::op
