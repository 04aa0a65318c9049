#include "cifartrainjob/job_state.h"

namespace cifar::op {

using std::chrono::seconds;

void set_progressing_state(const Job& job, const ReplicaTally& tally, bool restarting,
                           const std::optional<QueueWait>& queued, Clock::time_point now,
                           Plan& plan) {
  auto& status = plan.status;
  if (!plan.create_pods.empty() && !status.is_true(ConditionType::kCreated)) {
    const auto message =
        "created the Service and " + std::to_string(plan.create_pods.size()) + " pods";
    status.set_condition(ConditionType::kCreated, true, reason::kJobCreated, message, to_time(now));
    plan.events.push_back({"Normal", std::string(reason::kJobCreated), message});
  }
  const auto* in_queue = status.condition(ConditionType::kQueued);
  const bool was_queued = in_queue != nullptr && in_queue->status == ConditionStatus::kTrue;
  if (restarting) {
    status.set_state(ConditionType::kRestarting, reason::kPodRestarting, plan.events.back().message,
                     to_time(now));
    return;
  }
  if (queued) {
    // An Event when the job enters the queue or the reason changes (not with Kueue's every word).
    if (!was_queued || in_queue->reason != queued->reason) {
      const bool preempted = queued->reason == reason::kPreempted;
      plan.events.push_back({preempted ? "Warning" : "Normal", queued->reason, queued->message});
    }
    status.set_state(ConditionType::kQueued, queued->reason, queued->message, to_time(now));
    return;
  }
  if (was_queued) {
    const auto waited =
        in_queue->last_transition_time
            ? std::chrono::duration_cast<seconds>(now - *in_queue->last_transition_time)
            : seconds(0);
    const auto message = "Kueue admitted pod group " + pod_group_name(job) + " from queue " +
                         job.spec.queue + " after " + std::to_string(waited.count()) + " s";
    status.set_condition(ConditionType::kQueued, false, reason::kJobAdmitted, message,
                         to_time(now));
    plan.events.push_back({"Normal", std::string(reason::kJobAdmitted), message});
    status.state = ConditionType::kCreated;  // until a pod runs
  }
  if (tally.all_exist && tally.any_running) {
    status.set_state(ConditionType::kRunning, reason::kJobRunning, "the job's pods are running",
                     to_time(now));
  } else if (!status.state) {
    status.state = ConditionType::kCreated;
  }
}

}  // namespace cifar::op
