#include "cifartrainjob/job_end.h"

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/progress.h"
#include "cifartrainjob/store_outage.h"
#include "cifartrainjob/trainers.h"
#include "framework/pod_status.h"

namespace cifar::op {
namespace {

// Pods a finished job deletes under its cleanPodPolicy; an elastic job's rendezvous store under
// any (it never ends by itself, and has no log worth keeping).
void clean_up(const JobSpec& spec, const PodsByName& pods, Plan& plan) {
  for (const auto& [name, pod] : pods) {
    if (pod_terminating(pod)) continue;
    if (is_rendezvous_store(pod)) {
      plan.delete_pods.push_back(name);
      continue;
    }
    if (spec.clean_pod_policy == CleanPodPolicy::kNone) continue;
    const auto phase = pod_phase(pod);
    if (spec.clean_pod_policy == CleanPodPolicy::kAll || phase == PodPhase::kRunning ||
        phase == PodPhase::kPending) {
      plan.delete_pods.push_back(name);
    }
  }
}

}  // namespace

void finish(const Job& job, const PodsByName& pods, bool succeeded, std::string_view reason,
            const std::string& message, Clock::time_point now, Plan& plan) {
  const auto& spec = job.spec;
  auto& status = plan.status;
  plan.create_pods.clear();
  plan.delete_workloads.clear();  // Kueue would delete the pods kept by cleanPodPolicy with it
  plan.create_token_secret = false;
  plan.create_network_policy.reset();
  plan.create_service.reset();
  // A job that ended training with fewer trainers than it names says so.
  const auto said = message + ended_with_fewer_trainers(job, status.progress);
  status.set_state(succeeded ? ConditionType::kSucceeded : ConditionType::kFailed, reason, said,
                   to_time(now));
  if (status.is_true(ConditionType::kPodsNotReady)) {
    status.set_condition(ConditionType::kPodsNotReady, false, reason, "the job ended",
                         to_time(now));
  }
  status.completion_time = to_time(now);
  status.node_loss.reset();
  const auto message_of = [&](const std::string& name) {
    const auto* pod = find_pod(pods, name);
    return pod == nullptr ? std::string() : pod_termination_message(*pod);
  };
  const auto evaluator_message = spec.count(Role::kEvaluator) > 0
                                     ? message_of(pod_name(job, Role::kEvaluator, 0))
                                     : std::string();
  status.progress = final_progress(status.progress, message_of(chief_name(job)), evaluator_message,
                                   succeeded, format_time(now));
  // A job that succeeded saved its last checkpoint: a store outage its last scrape showed is over.
  report_store_outage(job, now, plan);
  plan.events.push_back({succeeded ? "Normal" : "Warning", std::string(reason), said});
  clean_up(spec, pods, plan);
  if (spec.ttl_seconds_after_finished) {
    plan.requeue_after = std::chrono::seconds(*spec.ttl_seconds_after_finished);
  }
}

void fail_past_backoff_limit(const Job& job, const PodsByName& pods, int64_t restarts,
                             const std::string& why, Clock::time_point now, Plan& plan) {
  plan.delete_pods.clear();
  finish(job, pods, false, reason::kBackoffLimitExceeded,
         "restarted " + std::to_string(restarts) + " times, more than backoffLimit " +
             std::to_string(job.spec.backoff_limit) + why,
         now, plan);
}

PhaseResult reconcile_finished(const JobSpec& spec, const PodsByName& pods, Clock::time_point now,
                               Plan& plan) {
  if (!plan.status.finished()) return PhaseResult::kContinue;
  clean_up(spec, pods, plan);
  if (spec.ttl_seconds_after_finished && plan.status.completion_time) {
    const auto expires =
        *plan.status.completion_time + std::chrono::seconds(*spec.ttl_seconds_after_finished);
    if (now >= expires) {
      plan.delete_job = true;
    } else {
      plan.requeue_after =
          std::chrono::duration_cast<std::chrono::seconds>(expires - now) + std::chrono::seconds(1);
    }
  }
  return PhaseResult::kDone;
}

}  // namespace cifar::op
