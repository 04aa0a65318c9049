#include "cifartrainjob/reconcile_phases.h"

#include "cifartrainjob/desired_state.h"
#include "contract/exit_codes.h"
#include "framework/pod_status.h"

namespace cifar::op {
namespace {

using nlohmann::json;

// Pods a finished job deletes under its cleanPodPolicy.
void clean_up(const JobSpec& spec, const PodsByName& pods, Plan& plan) {
  if (spec.clean_pod_policy == "None") return;
  for (const auto& [name, pod] : pods) {
    if (pod_terminating(pod)) continue;
    const auto phase = pod_phase(pod);
    if (spec.clean_pod_policy == "All" || phase == "Running" || phase == "Pending" ||
        phase.empty()) {
      plan.delete_pods.push_back(name);
    }
  }
}

// Ends the job as Succeeded or Failed: the state, completionTime, an Event, its pods' cleanup and
// the requeue for its TTL.
void finish(const JobSpec& spec, const PodsByName& pods, bool succeeded, std::string_view reason,
            const std::string& message, Clock::time_point now, Plan& plan) {
  plan.status.set_state(succeeded ? ConditionType::kSucceeded : ConditionType::kFailed, reason,
                        message, to_time(now));
  plan.status.completion_time = to_time(now);
  plan.events.push_back({succeeded ? "Normal" : "Warning", std::string(reason), message});
  clean_up(spec, pods, plan);
  if (spec.ttl_seconds_after_finished) {
    plan.requeue_after = std::chrono::seconds(*spec.ttl_seconds_after_finished);
  }
}

std::string describe_exit(const std::optional<int>& code) {
  return code ? "exit code " + std::to_string(*code) : "no exit code (evicted or lost)";
}

bool retryable(const JobSpec& spec, const std::optional<int>& code) {
  return spec.restart_policy == "OnFailure" ||
         (spec.restart_policy == "ExitCode" && (!code || contract::is_retryable_exit(*code)));
}

// The token Secret, NetworkPolicy and Service, until the Service exists.
void create_job_objects(const Job& job, bool service_exists, Plan& plan) {
  if (service_exists) return;
  plan.create_token_secret = true;
  plan.create_network_policy = desired_network_policy(job);
  plan.create_service = desired_service(job);
}

// The state of a job that goes on: Restarting, Running once every pod exists and one runs, else
// Created (announced once, with an Event, when its pods are first created).
void set_progressing_state(const ReplicaTally& tally, bool restarting, Clock::time_point now,
                           Plan& plan) {
  auto& status = plan.status;
  if (!plan.create_pods.empty() && !status.is_true(ConditionType::kCreated)) {
    const auto message =
        "created the Service and " + std::to_string(plan.create_pods.size()) + " pods";
    status.set_condition(ConditionType::kCreated, true, reason::kJobCreated, message, to_time(now));
    plan.events.push_back({"Normal", std::string(reason::kJobCreated), message});
  }
  if (restarting) {
    status.set_state(ConditionType::kRestarting, reason::kPodRestarting, plan.events.back().message,
                     to_time(now));
  } else if (tally.all_exist && tally.any_running) {
    status.set_state(ConditionType::kRunning, reason::kJobRunning, "the job's pods are running",
                     to_time(now));
  } else if (!status.state) {
    status.state = ConditionType::kCreated;
  }
}

}  // namespace

ReplicaTally tally_replicas(const Job& job, const PodsByName& pods) {
  const auto& spec = job.spec;
  ReplicaTally tally;
  for (const auto role : kRoles) {
    const int n = spec.count(role);
    if (n == 0) continue;
    ReplicaStatus counts;
    for (int i = 0; i < n; ++i) {
      const auto name = pod_name(job, role, i);
      const auto found = pods.find(name);
      if (found == pods.end()) {
        tally.missing.emplace_back(role, i);
        tally.all_exist = false;
        continue;
      }
      const auto& pod = found->second;
      if (pod_terminating(pod)) {
        tally.all_exist = false;  // recreated once it is gone
        continue;
      }
      tally.in_place_restarts += pod_restarts(pod);
      const auto phase = pod_phase(pod);
      if (phase == "Succeeded") {
        ++counts.succeeded;
      } else if (phase != "Failed") {
        ++counts.active;
        if (pod_ready(pod)) ++counts.ready;
        tally.any_running = tally.any_running || phase == "Running";
      } else if (FailedPod failed{name, pod_exit_code(pod)}; retryable(spec, failed.exit_code)) {
        ++counts.failed;
        tally.retryable.push_back(std::move(failed));
      } else {
        tally.permanent = std::move(failed);
        return tally;
      }
    }
    tally.statuses[std::string(replica_type(role))] = counts;
  }
  return tally;
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

PhaseResult reconcile_deadline(const Job& job, const PodsByName& pods, Clock::time_point now,
                               Plan& plan) {
  const auto& spec = job.spec;
  if (!plan.status.start_time) plan.status.start_time = to_time(now);
  if (!spec.active_deadline_seconds) return PhaseResult::kContinue;
  const auto deadline =
      *plan.status.start_time + std::chrono::seconds(*spec.active_deadline_seconds);
  if (now >= deadline) {
    finish(spec, pods, false, reason::kDeadlineExceeded,
           "the job ran longer than activeDeadlineSeconds (" +
               std::to_string(*spec.active_deadline_seconds) + " s)",
           now, plan);
    return PhaseResult::kDone;
  }
  plan.requeue_after =
      std::chrono::duration_cast<std::chrono::seconds>(deadline - now) + std::chrono::seconds(1);
  return PhaseResult::kContinue;
}

void reconcile_replicas(const Job& job, const PodsByName& pods, bool service_exists,
                        Clock::time_point now, Plan& plan) {
  const auto& spec = job.spec;
  auto& status = plan.status;
  create_job_objects(job, service_exists, plan);
  const auto tally = tally_replicas(job, pods);
  for (const auto& [role, index] : tally.missing) {
    plan.create_pods.push_back(desired_pod(job, role, index));
  }
  int64_t restarts = status.restarts.value_or(0);
  for (const auto& failed : tally.retryable) {
    plan.delete_pods.push_back(failed.name);
    restarts += 1;
    plan.events.push_back({"Warning", std::string(reason::kPodRestarting),
                           "pod " + failed.name + " failed with " +
                               describe_exit(failed.exit_code) + "; recreating it (restart " +
                               std::to_string(restarts) + ")"});
  }
  plan.restarts = restarts + tally.in_place_restarts;
  if (tally.permanent) {
    finish(spec, pods, false, reason::kPodFailed,
           "pod " + tally.permanent->name + " failed with " +
               describe_exit(tally.permanent->exit_code) + "; restartPolicy " +
               spec.restart_policy +
               (spec.restart_policy == "ExitCode" ? " (codes 1-127 are permanent)" : ""),
           now, plan);
    status.replica_statuses = tally.statuses;
    return;
  }
  status.restarts = restarts;
  status.replica_statuses = tally.statuses;

  if (plan.restarts > spec.backoff_limit) {
    plan.delete_pods.clear();
    finish(spec, pods, false, reason::kBackoffLimitExceeded,
           "restarted " + std::to_string(plan.restarts) + " times, more than backoffLimit " +
               std::to_string(spec.backoff_limit),
           now, plan);
    return;
  }
  const auto chief = spec.count(Role::kMaster) > 0 ? pod_name(job, Role::kMaster, 0)
                                                   : pod_name(job, Role::kWorker, 0);
  const auto chief_pod = pods.find(chief);
  if (chief_pod != pods.end() && pod_phase(chief_pod->second) == "Succeeded") {
    finish(spec, pods, true, reason::kJobSucceeded, "the chief " + chief + " succeeded", now, plan);
    return;
  }
  set_progressing_state(tally, !tally.retryable.empty(), now, plan);
}

}  // namespace cifar::op
