#include "cifartrainjob/reconcile.h"

#include <map>

#include "cifartrainjob/desired_state.h"
#include "contract/exit_codes.h"

namespace cifar::op {
namespace {

using nlohmann::json;

bool condition_true(const json& status, const std::string& type) {
  for (const auto& c : status.value("conditions", json::array())) {
    if (c.value("type", "") == type) return c.value("status", "") == "True";
  }
  return false;
}

// Sets condition `type` (True or False); the transition time changes only with its status.
void set_condition(json& status, const std::string& type, bool value, const std::string& reason,
                   const std::string& message, Clock::time_point now) {
  if (!status.contains("conditions")) status["conditions"] = json::array();
  const std::string state = value ? "True" : "False";
  for (auto& c : status["conditions"]) {
    if (c.value("type", "") != type) continue;
    if (c.value("status", "") != state) c["lastTransitionTime"] = format_time(now);
    if (c.value("status", "") != state || c.value("reason", "") != reason) {
      c["lastUpdateTime"] = format_time(now);
    }
    c["status"] = state;
    c["reason"] = reason;
    c["message"] = message;
    return;
  }
  if (!value) return;  // a condition that never held is not listed
  status["conditions"].push_back({{"type", type},
                                  {"status", state},
                                  {"reason", reason},
                                  {"message", message},
                                  {"lastTransitionTime", format_time(now)},
                                  {"lastUpdateTime", format_time(now)}});
}

// One of the exclusive states: it True, the other ones that held False.
void set_state(json& status, const std::string& state, const std::string& reason,
               const std::string& message, Clock::time_point now) {
  for (const auto* other : {"Running", "Restarting", "Suspended", "Succeeded", "Failed"}) {
    if (other != state && condition_true(status, other)) {
      set_condition(status, other, false, reason, message, now);
    }
  }
  set_condition(status, state, true, reason, message, now);
  status["state"] = state;
}

std::string phase_of(const json& pod) {
  return pod.value("status", json::object()).value("phase", "");
}

bool terminating(const json& pod) {
  return pod.value("metadata", json::object()).contains("deletionTimestamp");
}

// The exit code of the pod's (only) container, if it terminated.
std::optional<int> exit_code(const json& pod) {
  for (const auto& c :
       pod.value("status", json::object()).value("containerStatuses", json::array())) {
    const auto state = c.value("state", json::object());
    if (state.contains("terminated")) return state["terminated"].value("exitCode", 0);
    const auto last = c.value("lastState", json::object());
    if (last.contains("terminated")) return last["terminated"].value("exitCode", 0);
  }
  return std::nullopt;
}

int in_place_restarts(const json& pod) {
  int n = 0;
  for (const auto& c :
       pod.value("status", json::object()).value("containerStatuses", json::array())) {
    n += c.value("restartCount", 0);
  }
  return n;
}

bool ready(const json& pod) {
  for (const auto& c : pod.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

// Pods a finished job deletes under its cleanPodPolicy.
void clean_up(const JobSpec& spec, const std::map<std::string, json>& pods, Plan& plan) {
  if (spec.clean_pod_policy == "None") return;
  for (const auto& [name, pod] : pods) {
    if (terminating(pod)) continue;
    const auto phase = phase_of(pod);
    if (spec.clean_pod_policy == "All" || phase == "Running" || phase == "Pending" ||
        phase.empty()) {
      plan.delete_pods.push_back(name);
    }
  }
}

void finish(const Job& job, const std::map<std::string, json>& pods, bool succeeded,
            const std::string& reason, const std::string& message, Clock::time_point now,
            Plan& plan) {
  set_state(plan.status, succeeded ? "Succeeded" : "Failed", reason, message, now);
  plan.status["completionTime"] = format_time(now);
  plan.events.push_back({succeeded ? "Normal" : "Warning", reason, message});
  clean_up(job.spec, pods, plan);
  if (job.spec.ttl_seconds_after_finished) {
    plan.requeue_after = std::chrono::seconds(*job.spec.ttl_seconds_after_finished);
  }
}

std::string describe_exit(const std::optional<int>& code) {
  return code ? "exit code " + std::to_string(*code) : "no exit code (evicted or lost)";
}

}  // namespace

Plan reconcile_failed(const json& status, const std::string& reason, const std::string& message,
                      Clock::time_point now) {
  Plan plan;
  plan.status = status.is_object() ? status : json::object();
  if (!condition_true(plan.status, "Failed")) {
    set_state(plan.status, "Failed", reason, message, now);
    plan.status["completionTime"] = format_time(now);
    plan.events.push_back({"Warning", reason, message});
  }
  return plan;
}

Plan reconcile(const Job& job, const json& status, const Observed& observed,
               Clock::time_point now) {
  const auto& spec = job.spec;
  Plan plan;
  plan.status = status.is_object() ? status : json::object();
  std::map<std::string, json> pods;
  for (const auto& p : observed.pods) pods[p["metadata"]["name"].get<std::string>()] = p;

  // Finished: only cleanup and the TTL are left.
  if (condition_true(plan.status, "Succeeded") || condition_true(plan.status, "Failed")) {
    clean_up(spec, pods, plan);
    if (spec.ttl_seconds_after_finished && plan.status.contains("completionTime")) {
      const auto expires = parse_time(plan.status["completionTime"]) +
                           std::chrono::seconds(*spec.ttl_seconds_after_finished);
      if (now >= expires) {
        plan.delete_job = true;
      } else {
        plan.requeue_after = std::chrono::duration_cast<std::chrono::seconds>(expires - now) +
                             std::chrono::seconds(1);
      }
    }
    return plan;
  }

  if (spec.suspend) {
    for (const auto& [name, pod] : pods) {
      if (!terminating(pod)) plan.delete_pods.push_back(name);
    }
    if (!condition_true(plan.status, "Suspended")) {
      set_state(plan.status, "Suspended", "JobSuspended", "the job is suspended", now);
      plan.status.erase("startTime");  // the deadline counts from the resume
      plan.events.push_back({"Normal", "JobSuspended", "deleting the job's pods"});
    }
    return plan;
  }
  if (condition_true(plan.status, "Suspended")) {
    set_condition(plan.status, "Suspended", false, "JobResumed", "the job is resumed", now);
    plan.events.push_back({"Normal", "JobResumed", "creating the job's pods"});
  }
  if (!plan.status.contains("startTime")) plan.status["startTime"] = format_time(now);
  if (spec.active_deadline_seconds) {
    const auto deadline =
        parse_time(plan.status["startTime"]) + std::chrono::seconds(*spec.active_deadline_seconds);
    if (now >= deadline) {
      finish(job, pods, false, "DeadlineExceeded",
             "the job ran longer than activeDeadlineSeconds (" +
                 std::to_string(*spec.active_deadline_seconds) + " s)",
             now, plan);
      return plan;
    }
    plan.requeue_after =
        std::chrono::duration_cast<std::chrono::seconds>(deadline - now) + std::chrono::seconds(1);
  }

  if (!observed.service_exists) {
    plan.create_token_secret = true;
    plan.create_network_policy = desired_network_policy(job);
    plan.create_service = desired_service(job);
  }

  int64_t restarts = plan.status.value("restarts", int64_t{0});
  int64_t in_place = 0;
  bool restarting = false;
  bool all_exist = true;
  bool any_running = false;
  json replica_statuses = json::object();
  for (const auto role : kRoles) {
    const int n = spec.count(role);
    if (n == 0) continue;
    int active = 0;
    int ready_pods = 0;
    int succeeded = 0;
    int failed = 0;
    for (int i = 0; i < n; ++i) {
      const auto name = pod_name(job, role, i);
      const auto found = pods.find(name);
      if (found == pods.end()) {
        plan.create_pods.push_back(desired_pod(job, role, i));
        all_exist = false;
        continue;
      }
      const auto& pod = found->second;
      if (terminating(pod)) {
        all_exist = false;  // recreated once it is gone
        continue;
      }
      in_place += in_place_restarts(pod);
      const auto phase = phase_of(pod);
      if (phase == "Succeeded") {
        ++succeeded;
        continue;
      }
      if (phase != "Failed") {
        ++active;
        if (ready(pod)) ++ready_pods;
        any_running = any_running || phase == "Running";
        continue;
      }
      ++failed;
      const auto code = exit_code(pod);
      const bool retryable =
          spec.restart_policy == "OnFailure" ||
          (spec.restart_policy == "ExitCode" && (!code || contract::is_retryable_exit(*code)));
      if (!retryable) {
        finish(job, pods, false, "PodFailed",
               "pod " + name + " failed with " + describe_exit(code) + "; restartPolicy " +
                   spec.restart_policy +
                   (spec.restart_policy == "ExitCode" ? " (codes 1-127 are permanent)" : ""),
               now, plan);
        plan.status["replicaStatuses"] = replica_statuses;
        return plan;
      }
      plan.delete_pods.push_back(name);
      restarts += 1;
      restarting = true;
      plan.events.push_back({"Warning", "PodRestarting",
                             "pod " + name + " failed with " + describe_exit(code) +
                                 "; recreating it (restart " + std::to_string(restarts) + ")"});
    }
    replica_statuses[std::string(replica_type(role))] = {
        {"active", active}, {"ready", ready_pods}, {"succeeded", succeeded}, {"failed", failed}};
  }
  plan.status["restarts"] = restarts;
  plan.status["replicaStatuses"] = replica_statuses;

  if (restarts + in_place > spec.backoff_limit) {
    plan.delete_pods.clear();
    finish(job, pods, false, "BackoffLimitExceeded",
           "restarted " + std::to_string(restarts + in_place) + " times, more than backoffLimit " +
               std::to_string(spec.backoff_limit),
           now, plan);
    return plan;
  }

  const auto chief = spec.count(Role::kMaster) > 0 ? pod_name(job, Role::kMaster, 0)
                                                   : pod_name(job, Role::kWorker, 0);
  const auto chief_pod = pods.find(chief);
  if (chief_pod != pods.end() && phase_of(chief_pod->second) == "Succeeded") {
    finish(job, pods, true, "JobSucceeded", "the chief " + chief + " succeeded", now, plan);
    return plan;
  }

  if (!plan.create_pods.empty() && !condition_true(plan.status, "Created")) {
    set_condition(plan.status, "Created", true, "JobCreated",
                  "created the Service and " + std::to_string(plan.create_pods.size()) + " pods",
                  now);
    plan.events.push_back({"Normal", "JobCreated", plan.status["conditions"].back()["message"]});
  }
  if (restarting) {
    set_state(plan.status, "Restarting", "PodRestarting", plan.events.back().message, now);
  } else if (all_exist && any_running) {
    set_state(plan.status, "Running", "JobRunning", "the job's pods are running", now);
  } else if (!plan.status.contains("state")) {
    plan.status["state"] = "Created";
  }
  return plan;
}

}  // namespace cifar::op
