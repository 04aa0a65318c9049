// A CifarTrainJob's status as typed C++, the counterpart of the spec (job.h): its conditions,
// replica counts, times, restarts and progress, read from and written to the JSON the API server
// stores (deploy/crds/, `status`). Every condition type and reason the operator writes is
// declared here and nowhere else.
//
// The controller writes the whole status as a JSON merge patch, in which a field sent as null is
// removed. So to_json writes exactly the fields that are set, and from_json keeps everything it
// read: presence is part of the type (std::optional), fields this version does not know are
// kept in `other`, and status.progress (written by the progress scraper) is kept as read.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "framework/clock.h"

namespace cifar::op {

// status.conditions[].type, and status.state: the latest exclusive condition that holds. A new
// condition goes here, in kConditionTypes and condition_type_name, and in the CRD's enum.
// PodsNotReady is not a state: it says, beside the state, what the job's pods are waiting for
// (the scheduler's or the kubelet's reason, a create the API server refused for now, a pod that
// does not go away). Queued is the state of a job whose pods wait in a queue (Kueue) to be
// admitted as one group. TrainersMissing is not a state either: the job trains with fewer
// trainers than it names (a parameter server dropped one mid-run, or an asynchronous job started
// without one; trainers.h). Nor is CheckpointStoreUnreachable: the chief's checkpoint store has
// not answered for a while and the job trains on, its checkpoints waiting (store_outage.h). Nor is
// Stalled: none of the job's trainers has made progress for its stall limit (stall.h).
enum class ConditionType {
  kCreated,
  kQueued,
  kRunning,
  kRestarting,
  kSucceeded,
  kFailed,
  kSuspended,
  kPodsNotReady,
  kTrainersMissing,
  kCheckpointStoreUnreachable,
  kStalled
};
inline constexpr std::array<ConditionType, 11> kConditionTypes = {
    ConditionType::kCreated,         ConditionType::kQueued,
    ConditionType::kRunning,         ConditionType::kRestarting,
    ConditionType::kSucceeded,       ConditionType::kFailed,
    ConditionType::kSuspended,       ConditionType::kPodsNotReady,
    ConditionType::kTrainersMissing, ConditionType::kCheckpointStoreUnreachable,
    ConditionType::kStalled};
std::string_view condition_type_name(ConditionType type);  // "Created", ...
std::optional<ConditionType> parse_condition_type(std::string_view name);
// Exclusive conditions: one turning True turns the others False. Created is not exclusive: it
// stays True once the pods were first created; nor are PodsNotReady, TrainersMissing,
// CheckpointStoreUnreachable and Stalled.
bool is_exclusive(ConditionType type);

enum class ConditionStatus { kTrue, kFalse, kUnknown };

// Condition reasons, also the reasons of the Events that announce them.
namespace reason {
inline constexpr std::string_view kJobCreated = "JobCreated";
inline constexpr std::string_view kJobRunning = "JobRunning";
inline constexpr std::string_view kFinalEvaluation = "FinalEvaluation";  // the chief succeeded
inline constexpr std::string_view kPodRestarting = "PodRestarting";
// A pod stopped on request with the job's state saved (contract::kExitStopped): replaced.
inline constexpr std::string_view kPodStopped = "PodStopped";
// An elastic job's workers: one beyond the desired size asked to leave (kubectl scale down).
inline constexpr std::string_view kWorkerLeaving = "WorkerLeaving";
// An elastic job's world (the workers training in its newest round) changed: who joined, who left.
inline constexpr std::string_view kWorldChanged = "WorldChanged";
// An elastic job's worker above minReplicas waits for Kueue to admit its group while the others
// train (status.workers.reason, and an Event as it starts waiting).
inline constexpr std::string_view kWaitingForAdmission = "WaitingForAdmission";
// An elastic job has fewer workers running than its minReplicas: nobody trains until replacements
// join (status.workers.reason, and a Warning Event as it starts).
inline constexpr std::string_view kBelowMinimum = "BelowMinimum";
// A pod deleted on purpose whose grace period ran out before its graceful stop had saved the
// job's state (unsaved_stop.h): an Event only; the job goes on from its last checkpoint.
inline constexpr std::string_view kStopNotSaved = "StopNotSaved";
inline constexpr std::string_view kJobSucceeded = "JobSucceeded";
inline constexpr std::string_view kPodFailed = "PodFailed";
inline constexpr std::string_view kBackoffLimitExceeded = "BackoffLimitExceeded";
inline constexpr std::string_view kDeadlineExceeded = "DeadlineExceeded";
inline constexpr std::string_view kInvalidSpec = "InvalidSpec";
inline constexpr std::string_view kCreateRejected = "CreateRejected";
inline constexpr std::string_view kJobSuspended = "JobSuspended";
inline constexpr std::string_view kJobResumed = "JobResumed";
// Queued: Kueue's own reasons, passed on as they are: for a Workload that waits (Pending before
// Kueue gives one, Inadmissible, ...), that holds quota and waits for its admission checks
// (QuotaReserved), or that Kueue evicted for another reason than preemption (Evicted, or the
// Workload's own reason: PodsReadyTimeout, Deactivated, ...).
inline constexpr std::string_view kPending = "Pending";
inline constexpr std::string_view kQuotaReserved = "QuotaReserved";
inline constexpr std::string_view kEvicted = "Evicted";
// And the operator's:
inline constexpr std::string_view kWaitingForWorkload = "WaitingForWorkload";  // not made yet
inline constexpr std::string_view kPreempted = "Preempted";  // evicted, waiting to be readmitted
// The Workload of an earlier admission ended (a preemption, a suspend): it goes before the pods
// come back, or Kueue would count them to it.
inline constexpr std::string_view kRequeuing = "Requeuing";
inline constexpr std::string_view kJobAdmitted = "JobAdmitted";  // Queued turned False
// Queued False: a queue is named, but Kueue did not take the job's pods.
inline constexpr std::string_view kNotManagedByQueue = "NotManagedByQueue";
// PodsNotReady: besides the pods' own reasons (Unschedulable, ErrImagePull, ImagePullBackOff,
// CreateContainerConfigError, CrashLoopBackOff, ...), which are passed on as they are:
inline constexpr std::string_view kFailedCreate = "FailedCreate";  // refused for now (quota)
inline constexpr std::string_view kPodStuckTerminating = "PodStuckTerminating";
// A pod on a node that stopped answering, and its replacement on a live node.
inline constexpr std::string_view kNodeLost = "NodeLost";
inline constexpr std::string_view kNotOwned = "NotOwned";    // a name taken by another's object
inline constexpr std::string_view kPodsReady = "PodsReady";  // the condition turned False
// Failed:
inline constexpr std::string_view kStartupDeadlineExceeded = "StartupDeadlineExceeded";
// A pod found the run's object store refusing or silent (contract::kExitStoreUnavailable).
inline constexpr std::string_view kCheckpointStoreUnavailable = "CheckpointStoreUnavailable";
// A pod found the dataset's objects missing, wrong or refused (contract::kExitDataUnavailable).
inline constexpr std::string_view kDatasetUnavailable = "DatasetUnavailable";
// TrainersMissing: a trainer the parameter server dropped (it went silent past the PS's
// timeout), one that has not joined (an asynchronous job starts without it), and the condition
// turned False.
inline constexpr std::string_view kTrainerDropped = "TrainerDropped";
inline constexpr std::string_view kTrainerNotJoined = "TrainerNotJoined";
inline constexpr std::string_view kAllTrainersTraining = "AllTrainersTraining";
// CheckpointStoreUnreachable: the chief's store has not answered since a time (its checkpoints
// wait, training goes on), and the condition turned False.
inline constexpr std::string_view kStoreNotAnswering = "StoreNotAnswering";
inline constexpr std::string_view kStoreAnswers = "StoreAnswers";
// Stalled: no trainer progressed for its stall limit (also the reason of a job that fails or
// restarts pods for it, runPolicy.onStall), and the condition turned False.
inline constexpr std::string_view kTrainersStalled = "TrainersStalled";
inline constexpr std::string_view kProgressing = "Progressing";
// The Event of a node the job's stalls were pinned on twice: its pods avoid it from then on.
inline constexpr std::string_view kNodeSuspect = "NodeSuspect";
}  // namespace reason

struct JobCondition {
  ConditionType type = ConditionType::kCreated;
  ConditionStatus status = ConditionStatus::kTrue;
  std::string reason;
  std::string message;
  std::optional<Time> last_transition_time;  // set by the operator; optional only when read
  std::optional<Time> last_update_time;
};

// status.replicaStatuses[<replica type>]: the role's pods by what they are doing.
struct ReplicaStatus {
  int active = 0;  // pending or running
  int ready = 0;
  int succeeded = 0;
  int failed = 0;
};

// Pods replaced because their node was lost, kept until the job trains again (its step,
// status.progress.step, moves from where it stood): PodsNotReady says NodeLost meanwhile, so that
// REASON says why the job does not train while the replacements start and the ranks left wait.
struct NodeLoss {
  std::string node;
  std::vector<std::string> pods;
  int64_t step = -1;  // status.progress.step when they were replaced (-1: none reported yet)
  Time since;         // when the first was replaced
  bool operator==(const NodeLoss& other) const {
    return node == other.node && pods == other.pods && step == other.step && since == other.since;
  }
};

// The workers as the scale subresource and the Workers column show them (status.workers).
struct WorkerCount {
  int training = 0;      // an elastic job's world's size, else ready workers
  int desired = 0;       // replicaSpecs.Worker.replicas
  std::string selector;  // the label selector of the job's workers, for an autoscaler
  std::string reason;    // why training differs from desired ("" when they agree)
  std::string message;   // the reason in words, where there is more to say (who waits for what)
  bool operator==(const WorkerCount& other) const {
    return training == other.training && desired == other.desired && selector == other.selector &&
           reason == other.reason && message == other.message;
  }
};

struct JobStatus {
  std::optional<ConditionType> state;
  std::optional<std::vector<JobCondition>> conditions;
  // Keyed by replica type ("PS", "Master", ...; replica_type in job.h).
  std::optional<std::map<std::string, ReplicaStatus>> replica_statuses;
  std::optional<Time> start_time;
  std::optional<Time> completion_time;
  // The restarts backoffLimit counts (cifartrainjob/restart_count.h): the sum of pod_restarts.
  std::optional<int64_t> restarts;
  // Charged to each pod, by UID: its in-place restarts, plus one if it was recreated after a
  // failure; kept once the pod is gone.
  std::optional<std::map<std::string, int64_t>> pod_restarts;
  std::optional<std::string> model_dir;  // where the run's checkpoints are, as the pods see it
  // The newest incarnation handed out: the pods of each round that creates any carry the next
  // number (desired_state.h, stamp_incarnation), recorded with the round's status, so that it
  // only grows and a replacement always outranks the pod it replaces (the runtime's fence).
  std::optional<int64_t> incarnation;
  std::optional<NodeLoss> node_loss;
  // The job's stalls pinned on a node (cifartrainjob/stall.h: the node of a pod that stopped
  // answering, else of the trainers that fell behind), by node name, as status.stallsByNode; the
  // nodes with two, which the job's pods made from then on avoid, as status.suspectNodes.
  std::optional<std::map<std::string, int64_t>> stalls_by_node;
  std::optional<std::vector<std::string>> suspect_nodes;
  std::optional<WorkerCount> workers;
  // Why the job is where it is, in a word and a sentence (`kubectl get ctj` shows the reason,
  // `-o wide` the message): the state's condition when the job ended, is suspended or queued,
  // else what its pods wait for (PodsNotReady), else the trainers it trains without
  // (TrainersMissing); absent when all is well. Set by summarize().
  std::optional<std::string> summary_reason;   // status.reason
  std::optional<std::string> summary_message;  // status.message
  nlohmann::json progress;  // progress.h's object, null when absent; never read here
  nlohmann::json other = nlohmann::json::object();  // fields this version does not know

  [[nodiscard]] const JobCondition* condition(ConditionType type) const;
  [[nodiscard]] bool is_true(ConditionType type) const;
  [[nodiscard]] bool finished() const;  // Succeeded or Failed

  // Sets condition `type` True or False. Its lastTransitionTime changes only with its status,
  // lastUpdateTime also with its reason; a condition that never held is not listed.
  void set_condition(ConditionType type, bool value, std::string_view reason,
                     const std::string& message, Time now);
  // Makes exclusive condition `state` True and the state, and the others that held False.
  void set_state(ConditionType state, std::string_view reason, const std::string& message,
                 Time now);
  // Sets summary_reason and summary_message from the conditions (see above).
  void summarize();
};

// Reads a status as the API server returns it (null or {} for none); throws std::invalid_argument
// for a condition type or state this version does not know.
void from_json(const nlohmann::json& json, JobStatus& status);
void to_json(nlohmann::json& json, const JobStatus& status);

}  // namespace cifar::op
