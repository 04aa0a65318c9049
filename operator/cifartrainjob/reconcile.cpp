#include "cifartrainjob/reconcile.h"

#include "cifartrainjob/active_deadline.h"
#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/elastic.h"
#include "cifartrainjob/job_end.h"
#include "cifartrainjob/kueue_integration.h"
#include "cifartrainjob/replicas.h"
#include "cifartrainjob/restart_count.h"
#include "cifartrainjob/stall.h"
#include "cifartrainjob/store_outage.h"
#include "cifartrainjob/suspend.h"
#include "cifartrainjob/trainers.h"
#include "cifartrainjob/unsaved_stop.h"

namespace cifar::op {

Plan reconcile_failed(const JobStatus& status, std::string_view reason, const std::string& message,
                      Clock::time_point now) {
  Plan plan;
  plan.status = status;
  plan.restarts = status.restarts.value_or(0);
  if (!plan.status.is_true(ConditionType::kFailed)) {
    plan.status.set_state(ConditionType::kFailed, reason, message, to_time(now));
    plan.status.completion_time = to_time(now);
    plan.events.push_back({"Warning", std::string(reason), message});
  }
  plan.status.summarize();
  return plan;
}

void note_blocked_create(Plan& plan, std::string_view why, const std::string& message,
                         Clock::time_point now) {
  auto& status = plan.status;
  const auto* current = status.condition(ConditionType::kPodsNotReady);
  const bool news = current == nullptr || current->status != ConditionStatus::kTrue ||
                    current->reason != why || current->message != message;
  status.set_condition(ConditionType::kPodsNotReady, true, why, message, to_time(now));
  status.summarize();
  if (news) plan.events.push_back({"Warning", std::string(why), message});
}

Plan reconcile(const Job& job_as_given, const JobStatus& status, const Observed& observed,
               Clock::time_point now) {
  // The run's directory is chosen once, then read back from the status. A job the operator
  // started before status.modelDir existed ran in <path>/<name>, and stays there.
  Job job = job_as_given;
  if (status.model_dir) {
    job.run_dir = *status.model_dir;
  } else if (status.start_time && job.spec.resume_from.empty()) {
    job.run_dir = legacy_model_dir(job);
  }
  Plan plan;
  plan.status = status;
  if (observed.progress && !status.finished()) {
    plan.status.progress = *observed.progress;
    report_missing_trainers(job, now, plan);
    report_store_outage(job, now, plan);
  }
  if (!status.finished()) {
    for (const auto& pod : observed.deleted_pods) {
      if (auto event = unsaved_stop_event(job, pod)) plan.events.push_back(std::move(*event));
    }
  }
  const auto pods = pods_by_name(observed.pods);
  if (observed.progress && !status.finished()) {
    report_world_change(job, status.progress, pods, observed.troubled_nodes, plan);
  }
  const auto queued = queue_wait(job, pods, observed, plan.status);
  if (reconcile_finished(job.spec, pods, now, plan) == PhaseResult::kDone ||
      reconcile_suspended(job.spec, pods, now, plan) == PhaseResult::kDone ||
      reconcile_deadline(job, pods, now, plan, queued.has_value()) == PhaseResult::kDone) {
    // The replicas phase, which counts the restarts, did not run: the pods as they are.
    plan.restarts = count_restarts(pods, plan.status);
  } else {
    reconcile_replicas(job, pods, observed, now, plan, queued);
    if (plan.status.state == ConditionType::kRunning && !plan.status.finished()) {
      reconcile_stall(job, pods, observed.liveness, now, plan);
    }
  }
  plan.status.summarize();
  return plan;
}

}  // namespace cifar::op
