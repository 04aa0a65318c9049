#include "cifartrainjob/reconcile_phases.h"

#include <algorithm>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/progress.h"
#include "contract/exit_codes.h"
#include "contract/termination.h"
#include "framework/kueue.h"
#include "framework/pod_status.h"

namespace cifar::op {
namespace {

using nlohmann::json;
using std::chrono::seconds;

// How long a job whose chief succeeded waits for its evaluator to evaluate the final checkpoint
// (it exits by itself once it has): a test-set pass takes seconds to a minute.
constexpr seconds kFinalEvaluationWait{300};

// Waiting reasons of a pod that no wait can heal: the job fails at once instead of at its
// startup deadline. (ErrImageNeverPull, CreateContainerConfigError and image pulls can heal: an
// image imported, a Secret created, a registry back.)
bool cannot_heal(const std::string& waiting_reason) { return waiting_reason == "InvalidImageName"; }

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Look again after `after` (or sooner, if an earlier phase asked for that).
void look_again_in(Plan& plan, seconds after) {
  after = std::max(after, seconds(1));
  if (!plan.requeue_after || *plan.requeue_after > after) plan.requeue_after = after;
}

seconds until(Time when, Clock::time_point now) {
  return std::chrono::duration_cast<seconds>(when - now) + seconds(1);
}

std::string chief_name(const Job& job) {
  return job.spec.count(Role::kMaster) > 0 ? pod_name(job, Role::kMaster, 0)
                                           : pod_name(job, Role::kWorker, 0);
}

const json* find_pod(const PodsByName& pods, const std::string& name) {
  const auto found = pods.find(name);
  return found == pods.end() ? nullptr : &found->second;
}

// The trouble of the node a pod is on, if it has any.
const NodeTrouble* trouble_of(const json& pod, const NodeTroubles& troubled) {
  const auto found = troubled.find(pod_node(pod));
  return found == troubled.end() ? nullptr : &found->second;
}

// When a pod on a node in trouble is replaced: at once on a node out of service, else once the
// node has been not Ready for the run policy's grace.
Time replace_at(const NodeTrouble& trouble, const JobSpec& spec) {
  return trouble.out_of_service ? Time{} : trouble.since + seconds(spec.node_failure_grace_seconds);
}

// "is on node n2, not Ready for 35 s (NodeStatusUnknown: Kubelet stopped posting node status.)"
std::string describe_trouble(const std::string& node, const NodeTrouble& trouble,
                             Clock::time_point now) {
  if (trouble.out_of_service) return "is on node " + node + ", which is out of service";
  const auto lost_for =
      std::max<int64_t>(0, std::chrono::duration_cast<seconds>(now - trouble.since).count());
  std::string text = "is on node " + node + ", not Ready for " + std::to_string(lost_for) + " s (" +
                     trouble.reason;
  if (!trouble.message.empty()) text += ": " + trouble.message;
  return text + ")";
}

// Pods a finished job deletes under its cleanPodPolicy.
void clean_up(const JobSpec& spec, const PodsByName& pods, Plan& plan) {
  if (spec.clean_pod_policy == CleanPodPolicy::kNone) return;
  for (const auto& [name, pod] : pods) {
    if (pod_terminating(pod)) continue;
    const auto phase = pod_phase(pod);
    if (spec.clean_pod_policy == CleanPodPolicy::kAll || phase == "Running" || phase == "Pending" ||
        phase.empty()) {
      plan.delete_pods.push_back(name);
    }
  }
}

// Ends the job as Succeeded or Failed: the state, completionTime, the final progress, an Event,
// its pods' cleanup and the requeue for its TTL. A round that ends the job creates nothing.
void finish(const Job& job, const PodsByName& pods, bool succeeded, std::string_view reason,
            const std::string& message, Clock::time_point now, Plan& plan) {
  const auto& spec = job.spec;
  auto& status = plan.status;
  plan.create_pods.clear();
  plan.delete_workload.reset();  // Kueue would delete the pods kept by cleanPodPolicy with it
  plan.create_token_secret = false;
  plan.create_network_policy.reset();
  plan.create_service.reset();
  status.set_state(succeeded ? ConditionType::kSucceeded : ConditionType::kFailed, reason, message,
                   to_time(now));
  if (status.is_true(ConditionType::kPodsNotReady)) {
    status.set_condition(ConditionType::kPodsNotReady, false, reason, "the job ended",
                         to_time(now));
  }
  status.completion_time = to_time(now);
  const auto message_of = [&](const std::string& name) {
    const auto* pod = find_pod(pods, name);
    return pod == nullptr ? std::string() : pod_termination_message(*pod);
  };
  const auto evaluator_message = spec.count(Role::kEvaluator) > 0
                                     ? message_of(pod_name(job, Role::kEvaluator, 0))
                                     : std::string();
  status.progress = final_progress(status.progress, message_of(chief_name(job)), evaluator_message,
                                   succeeded, format_time(now));
  plan.events.push_back({succeeded ? "Normal" : "Warning", std::string(reason), message});
  clean_up(spec, pods, plan);
  if (spec.ttl_seconds_after_finished) {
    plan.requeue_after = seconds(*spec.ttl_seconds_after_finished);
  }
}

std::string describe_exit(const std::optional<int>& code) {
  return code ? "exit code " + std::to_string(*code) : "no exit code (evicted or lost)";
}

// What a failed pod said of its failure: the error in its termination log, else the last line of
// its log (terminationMessagePolicy FallbackToLogsOnError), shortened; "" if nothing.
std::string failure_detail(const json* pod) {
  if (pod == nullptr) return "";
  const auto message = pod_termination_message(*pod);
  std::string detail;
  const auto parsed = json::parse(message, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    const auto error = parsed.find(contract::termination::kError);
    if (error != parsed.end() && error->is_string()) detail = error->get<std::string>();
  } else if (const auto end = message.find_last_not_of(" \n"); end != std::string::npos) {
    const auto newline = message.rfind('\n', end);
    const auto start = newline == std::string::npos ? 0 : newline + 1;
    detail = message.substr(start, end - start + 1);
  }
  constexpr size_t kMaxDetail = 400;
  if (detail.size() > kMaxDetail) detail = detail.substr(0, kMaxDetail) + "...";
  return detail.empty() ? "" : ": " + detail;
}

// Of the pods restarted in place (restartPolicy OnFailure), the one whose container ended last,
// and what it said: a job that fails for restarting too often says why it restarted.
std::string last_in_place_failure(const PodsByName& pods) {
  const std::pair<const std::string, json>* last = nullptr;
  std::optional<Time> last_end;
  for (const auto& entry : pods) {
    if (pod_restarts(entry.second) == 0) continue;
    const auto ended = pod_finished_at(entry.second);
    if (ended && (!last_end || *ended > *last_end)) {
      last = &entry;
      last_end = ended;
    }
  }
  if (last == nullptr) return "";
  return "; the last, pod " + last->first + ", failed with " +
         describe_exit(pod_exit_code(last->second)) + failure_detail(&last->second);
}

bool retryable(const JobSpec& spec, const std::optional<int>& code) {
  return spec.restart_policy == RestartPolicy::kOnFailure ||
         (spec.restart_policy == RestartPolicy::kExitCode &&
          (!code || contract::is_retryable_exit(*code)));
}

// The token Secret, NetworkPolicy and Service, until the Service exists.
void create_job_objects(const Job& job, bool service_exists, Plan& plan) {
  if (service_exists) return;
  plan.create_token_secret = true;
  plan.create_network_policy = desired_network_policy(job);
  plan.create_service = desired_service(job);
}

// The state of a job that goes on: Restarting, Queued while its queue holds it, Running once every
// pod exists and one runs, else Created (announced once, with an Event, when its pods are first
// created). Leaving the queue is announced (Queued False, JobAdmitted) with the time it waited.
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

// A queue is named but Kueue did not take a pod (its webhook did not label it): Kueue is not
// installed with its pod integration, or its managedJobsNamespaceSelector leaves the namespace
// out. The pods then run without waiting for admission; condition Queued False says so, with an
// Event the first time.
void note_unqueued_pods(const Job& job, const PodsByName& pods, Clock::time_point now, Plan& plan) {
  if (job.spec.queue.empty()) return;
  for (const auto& [name, pod] : pods) {
    if (pod_terminating(pod) || kueue::managed(pod)) continue;
    auto& status = plan.status;
    const auto message = "queue " + job.spec.queue + " is named, but Kueue did not take pod " +
                         name + " (it has no " + std::string(kueue::kManagedLabel) +
                         " label): is Kueue installed with its pod integration, and does its "
                         "managedJobsNamespaceSelector match namespace " +
                         job.namespace_ + "? The pods run without waiting for admission";
    const auto* current = status.condition(ConditionType::kQueued);
    if (current == nullptr || current->reason != reason::kNotManagedByQueue) {
      plan.events.push_back({"Warning", std::string(reason::kNotManagedByQueue), message});
    }
    if (current != nullptr) {
      status.set_condition(ConditionType::kQueued, false, reason::kNotManagedByQueue, message,
                           to_time(now));
    } else {  // listed although it never held: it explains why the job did not queue
      if (!status.conditions) status.conditions.emplace();
      status.conditions->push_back({ConditionType::kQueued, ConditionStatus::kFalse,
                                    std::string(reason::kNotManagedByQueue), message, to_time(now),
                                    to_time(now)});
    }
    if (status.state == ConditionType::kQueued) status.state = ConditionType::kCreated;
    return;
  }
}

// Kueue's finalizer holds a pod of a group until Kueue sees a replacement or the group end; the
// job replaces a pod under its own name, which cannot be created while the old one is there. So a
// pod that is leaving (deleted, or deleted this round) and has ended (failed, succeeded, or on a
// lost node, where nothing can end it) is released.
void release_leaving_pods(const PodsByName& pods, const NodeTroubles& troubled, Plan& plan) {
  for (const auto& [name, pod] : pods) {
    if (!kueue::holds(pod)) continue;
    const bool forced = listed(plan.force_delete_pods, name);
    const bool leaving = forced || pod_terminating(pod) || listed(plan.delete_pods, name);
    const auto phase = pod_phase(pod);
    const auto* trouble = trouble_of(pod, troubled);
    const bool ended = forced || phase == "Failed" || phase == "Succeeded" ||
                       (trouble != nullptr && trouble->lost());
    if (leaving && ended) plan.release_pods.push_back(name);
  }
}

}  // namespace

ReplicaTally tally_replicas(const Job& job, const PodsByName& pods,
                            const std::set<std::string>& leaving) {
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
      if (pod_terminating(pod) || leaving.count(name) > 0) {
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

std::optional<QueueWait> queue_wait(const Job& job, const PodsByName& pods,
                                    const Observed& observed, const JobStatus& status) {
  const auto& spec = job.spec;
  if (spec.queue.empty()) return std::nullopt;
  const auto group = pod_group_name(job);
  QueueWait wait;
  if (!observed.workload_known) {
    // Pods made now could join a Workload of an admission that ended, not yet seen.
    wait.reason = reason::kWaitingForWorkload;
    wait.message =
        "waiting to read Kueue's Workloads (kueue.x-k8s.io/v1beta2) before creating "
        "the pods of group " +
        group + ": is Kueue installed?";
    wait.blocks_creates = true;
    return wait;
  }
  const auto* workload = observed.workload ? &*observed.workload : nullptr;
  bool any_pod = false;
  bool gated = false;
  for (const auto& [name, pod] : pods) {
    if (pod_terminating(pod)) continue;
    any_pod = true;
    gated = gated || pod_gated(pod);
  }
  const std::string in_queue = "in queue " + spec.queue;
  // Kueue evicted the group: its Workload says so, or the pods it stops do (they outlive a
  // Workload that ends as they do).
  std::optional<QueueWait> evicted;
  if (workload != nullptr && workload->evicted) {
    evicted =
        QueueWait{workload->eviction_reason == "Preempted" || workload->eviction_reason.empty()
                      ? std::string(reason::kPreempted)
                      : workload->eviction_reason,
                  workload->eviction_message};
  } else {
    for (const auto& [name, pod] : pods) {
      if (const auto message = kueue::eviction_message(pod)) {
        evicted = QueueWait{message->rfind("Preempted", 0) == 0 ? std::string(reason::kPreempted)
                                                                : std::string("Evicted"),
                            *message};
        break;
      }
    }
  }
  if (workload != nullptr && (workload->finished || workload->deleting)) {
    wait.reason = reason::kRequeuing;
    wait.message = "Kueue's Workload " + group + " of the group's last admission ended" +
                   (workload->deleting ? " and is being deleted" : "; deleting it") +
                   ": the pods are created again once it is gone, and queue " + in_queue;
    wait.blocks_creates = true;
  } else if (evicted) {
    wait.message = "its pods are deleted and come back to wait " + in_queue;
  } else if ((!gated && any_pod) || (workload != nullptr && workload->admitted)) {
    return std::nullopt;  // admitted: running, or Kueue is taking the gates off
  } else if (workload == nullptr) {
    wait.reason = reason::kWaitingForWorkload;
    wait.message = "waiting for Kueue to make the Workload of pod group " + group + " (" +
                   std::to_string(pod_count(spec)) + " pods, " +
                   (any_pod ? "gated" : "being created") + ")";
  } else if (!workload->quota_reserved) {
    wait.reason = workload->waiting_reason.empty() ? "Pending" : workload->waiting_reason;
    // Before Kueue first tries the Workload its QuotaReserved condition is missing: say so, so
    // that a reader (or a script) tells "not looked at yet" from Kueue's own why.
    wait.message = "pod group " + group + " waits " + in_queue + ": " +
                   (workload->waiting_message.empty() ? "Kueue has not tried to admit it yet"
                                                      : workload->waiting_message);
  } else {
    wait.reason = "QuotaReserved";
    wait.message =
        "Kueue reserved quota for pod group " + group + "; waiting for its admission checks";
  }
  if (evicted) {
    wait.reason = evicted->reason;
    wait.message =
        "Kueue evicted pod group " + group + " (" + evicted->message + "); " + wait.message;
  }
  // A preempted job stays Preempted until it is admitted again, through its Workload's end and
  // its new pods' wait.
  const auto* queued = status.condition(ConditionType::kQueued);
  if (queued != nullptr && queued->status == ConditionStatus::kTrue &&
      queued->reason == reason::kPreempted && wait.reason != reason::kPreempted) {
    wait.reason = reason::kPreempted;
    wait.message = "preempted; waiting to be admitted again: " + wait.message;
  }
  return wait;
}

PhaseResult reconcile_deadline(const Job& job, const PodsByName& pods, Clock::time_point now,
                               Plan& plan, bool queued) {
  const auto& spec = job.spec;
  if (queued) {
    plan.status.start_time.reset();  // the job's clock starts when Kueue admits it
    return PhaseResult::kContinue;
  }
  if (!plan.status.start_time) plan.status.start_time = to_time(now);
  if (!spec.active_deadline_seconds) return PhaseResult::kContinue;
  const auto deadline = *plan.status.start_time + seconds(*spec.active_deadline_seconds);
  if (now >= deadline) {
    finish(job, pods, false, reason::kDeadlineExceeded,
           "the job ran longer than activeDeadlineSeconds (" +
               std::to_string(*spec.active_deadline_seconds) + " s)",
           now, plan);
    return PhaseResult::kDone;
  }
  look_again_in(plan, until(deadline, now));
  return PhaseResult::kContinue;
}

std::set<std::string> replace_pods_on_lost_nodes(const Job& job, const PodsByName& pods,
                                                 const NodeTroubles& troubled,
                                                 Clock::time_point now, Plan& plan) {
  std::set<std::string> replaced;
  for (const auto& [name, pod] : pods) {
    const auto* trouble = trouble_of(pod, troubled);
    if (trouble == nullptr || !trouble->lost() || pod_phase(pod) == "Succeeded") continue;
    const auto due = replace_at(*trouble, job.spec);
    if (now < due) {
      look_again_in(plan, until(due, now));
      continue;
    }
    replaced.insert(name);
    plan.force_delete_pods.push_back(name);
    plan.events.push_back({"Warning", std::string(reason::kNodeLost),
                           "pod " + name + " " + describe_trouble(pod_node(pod), *trouble, now) +
                               ": deleting it for good and creating it again on a live node "
                               "(not counted against backoffLimit)"});
  }
  return replaced;
}

void reconcile_replicas(const Job& job, const PodsByName& pods, const Observed& observed,
                        Clock::time_point now, Plan& plan, const std::optional<QueueWait>& queued) {
  const auto& spec = job.spec;
  auto& status = plan.status;
  const auto& foreign = observed.foreign_pods;
  create_job_objects(job, observed.service_exists, plan);
  status.model_dir = model_dir(job);
  auto tally = tally_replicas(job, pods);
  status.replica_statuses = tally.statuses;

  // The chief's success ends the job, whatever failed besides: the training is done. The
  // evaluator first gets to evaluate the final checkpoint, for the job's final accuracy.
  const auto chief = chief_name(job);
  const auto* chief_pod = find_pod(pods, chief);
  if (chief_pod != nullptr && pod_phase(*chief_pod) == "Succeeded") {
    plan.restarts = status.restarts.value_or(0) + tally.in_place_restarts;
    const auto* evaluator = spec.count(Role::kEvaluator) > 0
                                ? find_pod(pods, pod_name(job, Role::kEvaluator, 0))
                                : nullptr;
    const auto chief_done = pod_finished_at(*chief_pod);
    if (evaluator != nullptr && !pod_terminating(*evaluator) &&
        pod_phase(*evaluator) == "Running" && chief_done &&
        now < *chief_done + kFinalEvaluationWait) {
      status.set_state(ConditionType::kRunning, reason::kFinalEvaluation,
                       "the chief " + chief +
                           " succeeded; waiting for the evaluator's final evaluation (at most " +
                           std::to_string(kFinalEvaluationWait.count()) + " s)",
                       to_time(now));
      look_again_in(plan, until(*chief_done + kFinalEvaluationWait, now));
      return;
    }
    std::string message = "the chief " + chief + " succeeded";
    if (evaluator != nullptr && pod_phase(*evaluator) != "Succeeded") {
      message += pod_phase(*evaluator) == "Failed"
                     ? "; the evaluator failed" + failure_detail(evaluator)
                     : "; the evaluator did not finish its final evaluation in time";
    }
    finish(job, pods, true, reason::kJobSucceeded, message, now, plan);
    return;
  }

  // Pods on a lost node: deleted for good, and counted as leaving until the cache shows them gone.
  const auto replaced = replace_pods_on_lost_nodes(job, pods, observed.troubled_nodes, now, plan);
  if (!replaced.empty()) {
    tally = tally_replicas(job, pods, replaced);
    status.replica_statuses = tally.statuses;
  }
  if (queued && queued->blocks_creates) {
    // The Workload of the group's last admission goes first (once the cache knows it).
    if (observed.workload && observed.workload->finished && !observed.workload->deleting) {
      plan.delete_workload = pod_group_name(job);
    }
    look_again_in(plan, seconds(5));  // its deletion, seen by the cache, queues the job too
  } else {
    for (const auto& [role, index] : tally.missing) {
      // A name held by a pod the job does not control is reported (report_holdups), not taken.
      if (foreign.count(pod_name(job, role, index)) == 0) {
        plan.create_pods.push_back(desired_pod(job, role, index));
      }
    }
  }
  int64_t restarts = status.restarts.value_or(0);
  for (const auto& failed : tally.retryable) {
    plan.delete_pods.push_back(failed.name);
    restarts += 1;
    plan.events.push_back({"Warning", std::string(reason::kPodRestarting),
                           "pod " + failed.name + " failed with " +
                               describe_exit(failed.exit_code) +
                               failure_detail(find_pod(pods, failed.name)) +
                               "; recreating it (restart " + std::to_string(restarts) + ")"});
  }
  plan.restarts = restarts + tally.in_place_restarts;
  if (tally.permanent) {
    const auto policy =
        name_of(kRestartPolicyNames, spec.restart_policy) +
        (spec.restart_policy == RestartPolicy::kExitCode ? " (codes 1-127 are permanent)" : "");
    finish(job, pods, false, reason::kPodFailed,
           "pod " + tally.permanent->name + " failed with " +
               describe_exit(tally.permanent->exit_code) +
               failure_detail(find_pod(pods, tally.permanent->name)) + "; restartPolicy " + policy,
           now, plan);
    return;
  }
  status.restarts = restarts;

  if (plan.restarts > spec.backoff_limit) {
    plan.delete_pods.clear();
    finish(job, pods, false, reason::kBackoffLimitExceeded,
           "restarted " + std::to_string(plan.restarts) + " times, more than backoffLimit " +
               std::to_string(spec.backoff_limit) + last_in_place_failure(pods),
           now, plan);
    return;
  }
  release_leaving_pods(pods, observed.troubled_nodes, plan);
  note_unqueued_pods(job, pods, now, plan);
  set_progressing_state(job, tally, !tally.retryable.empty() || !replaced.empty(), queued, now,
                        plan);
  report_holdups(job, pods, foreign, observed.troubled_nodes, now, plan,
                 observed.workload ? observed.workload->admitted_since : std::nullopt);
}

std::string Holdup::describe(Clock::time_point now) const {
  if (reason == reason::kPodStuckTerminating) {
    const auto overdue =
        since ? std::max<int64_t>(0, std::chrono::duration_cast<seconds>(now - *since).count()) : 0;
    return "pod " + pod + " is still terminating " + std::to_string(overdue) +
           " s after its grace period ended (a finalizer holds it, or its node stopped "
           "answering)";
  }
  if (reason.empty()) return "pod " + pod + " is still starting";
  if (reason == reason::kNotOwned) return "pod " + pod + " " + message;
  if (reason == reason::kNodeLost && node_trouble) {
    return "pod " + pod + " " + describe_trouble(node, *node_trouble, now) + message;
  }
  std::string text = "pod " + pod + " is waiting: " + reason;
  if (!message.empty()) text += ": " + message;
  return text;
}

std::vector<Holdup> find_holdups(const Job& job, const PodsByName& pods,
                                 const std::map<std::string, std::string>& foreign,
                                 const NodeTroubles& troubled, std::optional<Time> admitted_since) {
  const auto& spec = job.spec;
  std::vector<Holdup> holdups;
  for (const auto& [name, controller] : foreign) {
    Holdup holdup;
    holdup.pod = name;
    holdup.reason = reason::kNotOwned;
    holdup.message = "exists and is not managed by this job (its controller: " + controller +
                     "); delete it, or give the job another name";
    holdups.push_back(std::move(holdup));
  }
  for (const auto& [name, pod] : pods) {
    Holdup holdup;
    holdup.pod = name;
    if (const auto* trouble = trouble_of(pod, troubled);
        trouble != nullptr && pod_phase(pod) != "Succeeded") {
      // Neither its startup nor its terminating deadline: its node cannot say, and the pod is
      // replaced (replace_pods_on_lost_nodes) once the node is lost for long enough.
      holdup.reason = reason::kNodeLost;
      holdup.node = pod_node(pod);
      holdup.node_trouble = *trouble;
      if (!trouble->lost()) {
        holdup.message = "; it is replaced if the node stops answering";
      } else if (trouble->out_of_service) {
        holdup.message = "; it is replaced now";
      } else {
        holdup.message = "; it is replaced once the node has been lost " +
                         std::to_string(spec.node_failure_grace_seconds) +
                         " s (runPolicy.nodeFailureGraceSeconds)";
      }
      holdup.since = trouble->since;
      holdups.push_back(std::move(holdup));
      continue;
    }
    if (pod_terminating(pod)) {
      const auto due = pod_deletion_due(pod);
      if (!due) continue;
      holdup.reason = reason::kPodStuckTerminating;
      holdup.since = *due;
      if (spec.terminating_deadline_seconds > 0) {
        holdup.fails_at = *due + seconds(spec.terminating_deadline_seconds);
      }
      holdups.push_back(std::move(holdup));
      continue;
    }
    const auto phase = pod_phase(pod);
    if (phase == "Succeeded" || phase == "Failed") continue;
    if (pod_gated(pod)) continue;  // waits in a queue, not for a fault: no startup deadline yet
    if (const auto waiting = pod_waiting(pod)) {
      holdup.reason = waiting->reason;
      holdup.message = waiting->message;
      holdup.permanent = cannot_heal(waiting->reason);
    }
    auto created = pod_created_at(pod);
    if (created && admitted_since && *admitted_since > *created) created = admitted_since;
    if (!pod_started(pod) && created) {
      holdup.since = *created;
      if (spec.startup_deadline_seconds > 0) {
        holdup.fails_at = *created + seconds(spec.startup_deadline_seconds);
      }
    }
    // A pod on its way (being scheduled, its container being created) is no holdup to report,
    // but its startup deadline runs.
    if (!holdup.reason.empty() || holdup.fails_at) holdups.push_back(std::move(holdup));
  }
  return holdups;
}

void report_holdups(const Job& job, const PodsByName& pods,
                    const std::map<std::string, std::string>& foreign, const NodeTroubles& troubled,
                    Clock::time_point now, Plan& plan, std::optional<Time> admitted_since) {
  auto& status = plan.status;
  auto holdups = find_holdups(job, pods, foreign, troubled, admitted_since);
  // A pod this round deletes for good is reported by its Event, not as still waiting; nor is one
  // this round releases from Kueue's finalizer, which held it past its grace period.
  holdups.erase(std::remove_if(holdups.begin(), holdups.end(),
                               [&](const Holdup& h) {
                                 return listed(plan.force_delete_pods, h.pod) ||
                                        listed(plan.release_pods, h.pod);
                               }),
                holdups.end());
  // A pod still terminating within its grace period is going as it should.
  const auto reportable = [&](const Holdup& h) {
    return !h.reason.empty() &&
           (h.reason != reason::kPodStuckTerminating || (h.since && now >= *h.since));
  };
  for (const auto& holdup : holdups) {
    if (holdup.permanent) {
      finish(job, pods, false, holdup.reason,
             holdup.describe(now) + "; this cannot heal without a change to the job", now, plan);
      return;
    }
    if (!holdup.fails_at) continue;
    if (now < *holdup.fails_at) {
      look_again_in(plan, until(*holdup.fails_at, now));
      continue;
    }
    if (holdup.reason == reason::kPodStuckTerminating) {
      finish(job, pods, false, reason::kPodStuckTerminating,
             holdup.describe(now) + "; runPolicy.terminatingDeadlineSeconds is " +
                 std::to_string(job.spec.terminating_deadline_seconds),
             now, plan);
    } else {
      finish(job, pods, false, reason::kStartupDeadlineExceeded,
             "pod " + holdup.pod + " did not start within " +
                 std::to_string(job.spec.startup_deadline_seconds) +
                 " s (runPolicy.startupDeadlineSeconds): " + holdup.describe(now),
             now, plan);
    }
    return;
  }
  const auto shown = std::find_if(holdups.begin(), holdups.end(), reportable);
  const auto* current = status.condition(ConditionType::kPodsNotReady);
  const bool held = current != nullptr && current->status == ConditionStatus::kTrue;
  if (shown != holdups.end()) {
    const auto message = shown->describe(now);
    // An Event when the reason or the pod changes, not with every refresh of the message.
    const bool news = !held || current->reason != shown->reason ||
                      current->message.rfind("pod " + shown->pod + " ", 0) != 0;
    status.set_condition(ConditionType::kPodsNotReady, true, shown->reason, message, to_time(now));
    if (news) plan.events.push_back({"Warning", shown->reason, message});
    look_again_in(plan, seconds(30));  // a pod's reason changes without an event of ours
  } else if (held &&
             !((current->reason == reason::kFailedCreate || current->reason == reason::kNotOwned) &&
               (!plan.create_pods.empty() || plan.create_service))) {
    // (A create refused or blocked stays reported while the round tries it again.)
    status.set_condition(ConditionType::kPodsNotReady, false, reason::kPodsReady,
                         "no pod of the job is held", to_time(now));
  }
}

}  // namespace cifar::op
