#include "cifartrainjob/suspend.h"

#include "framework/pod_status.h"

namespace cifar::op {

PhaseResult reconcile_suspended(const JobSpec& spec, const PodsByName& pods, Clock::time_point now,
                                Plan& plan) {
  auto& status = plan.status;
  if (spec.suspend) {
    for (const auto& [name, pod] : pods) {
      if (!pod_terminating(pod)) plan.delete_pods.push_back(name);
    }
    if (!status.is_true(ConditionType::kSuspended)) {
      status.set_state(ConditionType::kSuspended, reason::kJobSuspended, "the job is suspended",
                       to_time(now));
      status.start_time.reset();  // the deadline counts from the resume
      plan.events.push_back(
          {"Normal", std::string(reason::kJobSuspended), "deleting the job's pods"});
    }
    return PhaseResult::kDone;
  }
  if (status.is_true(ConditionType::kSuspended)) {
    status.set_condition(ConditionType::kSuspended, false, reason::kJobResumed,
                         "the job is resumed", to_time(now));
    plan.events.push_back({"Normal", std::string(reason::kJobResumed), "creating the job's pods"});
  }
  return PhaseResult::kContinue;
}

}  // namespace cifar::op
