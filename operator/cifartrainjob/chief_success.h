// The job succeeds when its chief (the master, or worker 0 without a master) succeeds, whatever
// failed besides: the training is done. The evaluator never decides success, but first gets to
// evaluate the final checkpoint, for the job's final accuracy (bounded by kFinalEvaluationWait).
#pragma once

#include <chrono>

#include "api/job.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"

namespace cifar::op {

// How long a job whose chief succeeded waits for its evaluator to evaluate the final checkpoint
// (it exits by itself once it has): a test-set pass takes seconds to a minute.
inline constexpr std::chrono::seconds kFinalEvaluationWait{300};

// If the chief succeeded: the job waits for its running evaluator's final evaluation (state
// Running, reason FinalEvaluation) or succeeds, and the round ends (kDone); else kContinue.
PhaseResult succeed_with_chief(const Job& job, const PodsByName& pods, Clock::time_point now,
                               Plan& plan);

}  // namespace cifar::op
