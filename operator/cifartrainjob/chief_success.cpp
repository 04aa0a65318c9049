#include "cifartrainjob/chief_success.h"

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/failure_wording.h"
#include "cifartrainjob/job_end.h"
#include "cifartrainjob/restart_count.h"
#include "framework/pod_status.h"

namespace cifar::op {

PhaseResult succeed_with_chief(const Job& job, const PodsByName& pods, Clock::time_point now,
                               Plan& plan) {
  const auto& spec = job.spec;
  auto& status = plan.status;
  const auto chief = chief_name(job);
  const auto* chief_pod = find_pod(pods, chief);
  if (chief_pod == nullptr || pod_phase(*chief_pod) != PodPhase::kSucceeded) {
    return PhaseResult::kContinue;
  }
  plan.restarts = count_restarts(pods, status);
  const auto* evaluator = spec.count(Role::kEvaluator) > 0
                              ? find_pod(pods, pod_name(job, Role::kEvaluator, 0))
                              : nullptr;
  const auto chief_done = pod_finished_at(*chief_pod);
  if (evaluator != nullptr && !pod_terminating(*evaluator) &&
      pod_phase(*evaluator) == PodPhase::kRunning && chief_done &&
      now < *chief_done + kFinalEvaluationWait) {
    status.set_state(ConditionType::kRunning, reason::kFinalEvaluation,
                     "the chief " + chief +
                         " succeeded; waiting for the evaluator's final evaluation (at most " +
                         std::to_string(kFinalEvaluationWait.count()) + " s)",
                     to_time(now));
    look_again_in(plan, seconds_until(*chief_done + kFinalEvaluationWait, now));
    return PhaseResult::kDone;
  }
  std::string message = "the chief " + chief + " succeeded";
  if (evaluator != nullptr && pod_phase(*evaluator) != PodPhase::kSucceeded) {
    message += pod_phase(*evaluator) == PodPhase::kFailed
                   ? "; the evaluator failed" + failure_detail(evaluator)
                   : "; the evaluator did not finish its final evaluation in time";
  }
  finish(job, pods, true, reason::kJobSucceeded, message, now, plan);
  return PhaseResult::kDone;
}

}  // namespace cifar::op
