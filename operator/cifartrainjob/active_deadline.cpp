#include "cifartrainjob/active_deadline.h"

#include "cifartrainjob/job_end.h"

namespace cifar::op {

PhaseResult reconcile_deadline(const Job& job, const PodsByName& pods, Clock::time_point now,
                               Plan& plan, bool queued) {
  const auto& spec = job.spec;
  if (queued) {
    plan.status.start_time.reset();  // the job's clock starts when Kueue admits it
    return PhaseResult::kContinue;
  }
  if (!plan.status.start_time) plan.status.start_time = to_time(now);
  if (!spec.active_deadline_seconds) return PhaseResult::kContinue;
  const auto deadline =
      *plan.status.start_time + std::chrono::seconds(*spec.active_deadline_seconds);
  if (now >= deadline) {
    finish(job, pods, false, reason::kDeadlineExceeded,
           "the job ran longer than activeDeadlineSeconds (" +
               std::to_string(*spec.active_deadline_seconds) + " s)",
           now, plan);
    return PhaseResult::kDone;
  }
  look_again_in(plan, seconds_until(deadline, now));
  return PhaseResult::kContinue;
}

}  // namespace cifar::op
