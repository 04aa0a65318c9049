#include "cifartrainjob/reconcile.h"

#include "cifartrainjob/reconcile_phases.h"

namespace cifar::op {

Plan reconcile_failed(const JobStatus& status, std::string_view reason, const std::string& message,
                      Clock::time_point now) {
  Plan plan;
  plan.status = status;
  if (!plan.status.is_true(ConditionType::kFailed)) {
    plan.status.set_state(ConditionType::kFailed, reason, message, to_time(now));
    plan.status.completion_time = to_time(now);
    plan.events.push_back({"Warning", std::string(reason), message});
  }
  return plan;
}

Plan reconcile(const Job& job, const JobStatus& status, const Observed& observed,
               Clock::time_point now) {
  Plan plan;
  plan.status = status;
  PodsByName pods;
  for (const auto& p : observed.pods) pods[p["metadata"]["name"].get<std::string>()] = p;
  if (reconcile_finished(job.spec, pods, now, plan) == PhaseResult::kDone) return plan;
  if (reconcile_suspended(job.spec, pods, now, plan) == PhaseResult::kDone) return plan;
  if (reconcile_deadline(job, pods, now, plan) == PhaseResult::kDone) return plan;
  reconcile_replicas(job, pods, observed.service_exists, now, plan);
  return plan;
}

}  // namespace cifar::op
