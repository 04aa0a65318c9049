// The phases of one reconcile (reconcile.h), in the order reconcile() runs them. Each is a pure
// function of the job, its pods and the time that adds to the plan (and its status); every phase
// but the last can end the round.
//   finished   a Succeeded or Failed job: its pods' cleanup and its TTL, nothing else
//   suspended  runPolicy.suspend deletes the pods; clearing it resumes the job
//   deadline   the job's clock (startTime) and activeDeadlineSeconds; a queued job's clock stands
//              until Kueue admits it (queue_wait)
//   replicas   the job's objects and pods: success of the chief (after the evaluator's final
//              evaluation), create the missing ones, restart or fail on failed pods, backoffLimit
//              (the count in plan.restarts), the state that follows, and what holds its pods
//              back (report_holdups: PodsNotReady, the startup and terminating deadlines)
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/job.h"
#include "api/status.h"
#include "cifartrainjob/reconcile.h"
#include "framework/clock.h"

namespace cifar::op {

// The job's pods, by name.
using PodsByName = std::map<std::string, nlohmann::json>;

// Whether a phase ended the round (kDone) or the next phase runs (kContinue).
enum class PhaseResult { kContinue, kDone };

PhaseResult reconcile_finished(const JobSpec& spec, const PodsByName& pods, Clock::time_point now,
                               Plan& plan);
PhaseResult reconcile_suspended(const JobSpec& spec, const PodsByName& pods, Clock::time_point now,
                                Plan& plan);
// Why a job with a queue waits, its state Queued with this reason and message: some of its pods
// are gated until Kueue admits its group (Kueue's reason and message; WaitingForWorkload before
// Kueue made the Workload), Kueue evicted the group and it waits to be admitted again (Preempted,
// kept until then), or the Workload of an admission that ended is still there (Requeuing: it is
// deleted, and no pod is created until it is gone, or Kueue would count the new pods to it).
// nullopt: the job has no queue, or its group is admitted.
struct QueueWait {
  std::string reason;
  std::string message;
  bool blocks_creates = false;  // the Workload of an ended admission is still there
};
std::optional<QueueWait> queue_wait(const Job& job, const PodsByName& pods,
                                    const Observed& observed, const JobStatus& status);

// `queued`: the job waits in its queue (queue_wait): its clock stands (startTime is cleared, the
// deadline counts from the admission).
PhaseResult reconcile_deadline(const Job& job, const PodsByName& pods, Clock::time_point now,
                               Plan& plan, bool queued = false);
// `observed`: besides the pods, the pods of the job's names it does not control, whether its
// Service exists, its pods' nodes in trouble and its queue's Workload; `queued`: queue_wait's.
void reconcile_replicas(const Job& job, const PodsByName& pods, const Observed& observed,
                        Clock::time_point now, Plan& plan,
                        const std::optional<QueueWait>& queued = std::nullopt);

// The pods on a node in trouble that are due to be replaced (runPolicy.nodeFailureGraceSeconds
// after the node stopped being Ready, at once if it is out of service): their names go to
// plan.force_delete_pods with an Event, and are returned; a requeue is asked for the next one.
// A Succeeded pod is left: its work is done.
std::set<std::string> replace_pods_on_lost_nodes(const Job& job, const PodsByName& pods,
                                                 const NodeTroubles& troubled,
                                                 Clock::time_point now, Plan& plan);

// A failed pod: its name and exit code, if it has one.
struct FailedPod {
  std::string name;
  std::optional<int> exit_code;
};

// The job's pods as one pass over its replicas sees them, role by role (kRoles) and index by
// index. The pass stops at the first pod whose failure is permanent under the restartPolicy: the
// job fails there, and what comes after it is not looked at.
struct ReplicaTally {
  std::map<std::string, ReplicaStatus> statuses;  // by replica type, the roles passed in full
  std::vector<std::pair<Role, int>> missing;      // replicas without a pod
  std::vector<FailedPod> retryable;               // failed pods to recreate
  std::optional<FailedPod> permanent;             // the failure that fails the job
  int64_t in_place_restarts = 0;                  // of the pods that exist
  bool all_exist = true;                          // every replica's pod, none terminating
  bool any_running = false;
};
// `leaving`: pods being deleted this round, counted as terminating.
ReplicaTally tally_replicas(const Job& job, const PodsByName& pods,
                            const std::set<std::string>& leaving = {});

// A pod that holds the job back: one waiting for something (the scheduler, an image, a Secret:
// pod_waiting's reason and message), one that has not started yet (reason ""), one deleted and
// still there (PodStuckTerminating), or one on a node in trouble (NodeLost: no deadline, it is
// replaced).
struct Holdup {
  std::string pod;
  std::string reason;
  std::string message;
  std::optional<Time> since;     // created (not started yet), or when its grace period ended
  std::optional<Time> fails_at;  // when it fails the job, if it does (the run policy's deadlines)
  bool permanent = false;        // a reason no wait heals: it fails the job at once
  std::string node;              // NodeLost: the pod's node
  std::optional<NodeTrouble> node_trouble;                          // and what is wrong with it
  [[nodiscard]] std::string describe(Clock::time_point now) const;  // "pod x is waiting: ..."
};
// `foreign` names held by pods the job does not control come first (reason NotOwned). A pod's
// startup deadline counts from its creation, or from `admitted_since` (Kueue admitted its group)
// if that is later: a pod gated in a queue has not begun to start.
std::vector<Holdup> find_holdups(const Job& job, const PodsByName& pods,
                                 const std::map<std::string, std::string>& foreign = {},
                                 const NodeTroubles& troubled = {},
                                 std::optional<Time> admitted_since = std::nullopt);
// Ends the job on a holdup past its deadline or one that cannot heal; otherwise sets condition
// PodsNotReady from the first holdup with a reason (a Warning Event when that is news), or turns it
// False when nothing holds the pods, and asks to look again at the next deadline.
void report_holdups(const Job& job, const PodsByName& pods,
                    const std::map<std::string, std::string>& foreign, const NodeTroubles& troubled,
                    Clock::time_point now, Plan& plan,
                    std::optional<Time> admitted_since = std::nullopt);

}  // namespace cifar::op
