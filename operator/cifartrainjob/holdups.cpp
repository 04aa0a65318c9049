#include "cifartrainjob/holdups.h"

#include <algorithm>

#include "cifartrainjob/job_end.h"
#include "cifartrainjob/node_loss.h"
#include "framework/pod_status.h"

namespace cifar::op {
namespace {

using std::chrono::seconds;

// Waiting reasons of a pod that no wait can heal: the job fails at once instead of at its
// startup deadline. (ErrImageNeverPull, CreateContainerConfigError and image pulls can heal: an
// image imported, a Secret created, a registry back.)
bool cannot_heal(const std::string& waiting_reason) { return waiting_reason == "InvalidImageName"; }

// The kubelet confirms that a pod's containers ended by deleting it again with a grace period of
// 0, which moves its deletionTimestamp to that moment; the pod is gone a moment later unless a
// finalizer holds it. One still there this long after its grace period ended is stuck.
constexpr seconds kStuckAfterGrace{5};

}  // namespace

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
    return "pod " + pod + " " + describe_trouble(node, *node_trouble) + message;
  }
  std::string text = "pod " + pod + " is waiting: " + reason;
  if (!message.empty()) text += ": " + message;
  return text;
}

std::vector<Holdup> find_holdups(const Job& job, const PodsByName& pods,
                                 const std::map<std::string, std::string>& foreign,
                                 const NodeTroubles& troubled,
                                 const AdmittedSince& admitted_since) {
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
        trouble != nullptr && pod_phase(pod) != PodPhase::kSucceeded) {
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
      if (spec.terminating_deadline_seconds > 0) {  // never before it counts as stuck
        holdup.fails_at =
            *due + std::max(seconds(spec.terminating_deadline_seconds), kStuckAfterGrace);
      }
      holdups.push_back(std::move(holdup));
      continue;
    }
    const auto phase = pod_phase(pod);
    if (phase == PodPhase::kSucceeded || phase == PodPhase::kFailed) continue;
    if (pod_gated(pod)) continue;  // waits in a queue, not for a fault: no startup deadline yet
    if (const auto waiting = pod_waiting(pod)) {
      holdup.reason = waiting->reason;
      holdup.message = waiting->message;
      holdup.permanent = cannot_heal(waiting->reason);
    }
    auto created = pod_created_at(pod);
    const auto admitted = admitted_since ? admitted_since(pod) : std::nullopt;
    if (created && admitted && *admitted > *created) created = admitted;
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
                    Clock::time_point now, Plan& plan, const AdmittedSince& admitted_since) {
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
  // A pod still terminating within its grace period (and moments after) is going as it should.
  const auto reportable = [&](const Holdup& h) {
    return !h.reason.empty() && (h.reason != reason::kPodStuckTerminating ||
                                 (h.since && now >= *h.since + kStuckAfterGrace));
  };
  for (const auto& holdup : holdups) {
    if (holdup.reason == reason::kPodStuckTerminating && holdup.since &&
        now < *holdup.since + kStuckAfterGrace) {
      look_again_in(plan, seconds_until(*holdup.since + kStuckAfterGrace, now));
    }
    if (holdup.permanent) {
      finish(job, pods, false, holdup.reason,
             holdup.describe(now) + "; this cannot heal without a change to the job", now, plan);
      return;
    }
    if (!holdup.fails_at) continue;
    if (now < *holdup.fails_at) {
      look_again_in(plan, seconds_until(*holdup.fails_at, now));
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
  // A replacement of a lost node's pod on its way is part of the node loss, still reported.
  const bool replacement_starting =
      shown != holdups.end() && status.node_loss && listed(status.node_loss->pods, shown->pod) &&
      (shown->reason == "ContainerCreating" || shown->reason == "PodInitializing");
  if (shown != holdups.end() && !replacement_starting) {
    const auto message = shown->describe(now);
    // An Event when the reason or the pod changes, not with every refresh of the message.
    const bool news = !held || current->reason != shown->reason ||
                      current->message.rfind("pod " + shown->pod + " ", 0) != 0;
    status.set_condition(ConditionType::kPodsNotReady, true, shown->reason, message, to_time(now));
    if (news) plan.events.push_back({"Warning", shown->reason, message});
    look_again_in(plan, seconds(30));  // a pod's reason changes without an event of ours
  } else if (status.node_loss) {
    // The replacements run, and the job has not trained since: the ranks left wait for them,
    // the parameter servers restore their shards. Its NodeLost Event was said at the replacement.
    status.set_condition(ConditionType::kPodsNotReady, true, reason::kNodeLost,
                         describe_node_loss(*status.node_loss, now), to_time(now));
    look_again_in(plan, seconds(10));
  } else if (held &&
             !((current->reason == reason::kFailedCreate || current->reason == reason::kNotOwned) &&
               (!plan.create_pods.empty() || plan.create_service))) {
    // (A create refused or blocked stays reported while the round tries it again.)
    status.set_condition(ConditionType::kPodsNotReady, false, reason::kPodsReady,
                         "no pod of the job is held", to_time(now));
  }
}

}  // namespace cifar::op
