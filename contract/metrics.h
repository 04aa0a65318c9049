// The Prometheus metrics cifar-train serves on the metrics port (runtime/metrics) and the
// operator reads into status.progress (operator/cifartrainjob/progress.cpp). Every series carries
// the labels job, role and index.
#pragma once

namespace cifar::contract::metric {

inline constexpr char kJobLabel[] = "job";
inline constexpr char kRoleLabel[] = "role";
inline constexpr char kIndexLabel[] = "index";

// Every role: seconds since its last progress (a trainer's step, a PS's update applied, an
// evaluator's checkpoint evaluated); 0 while it waits by design (runtime/health/heartbeat.h).
inline constexpr char kSecondsSinceProgress[] = "cifar_seconds_since_progress";
// A trainer's stall watchdog (runtime/health/watchdog.h): the limit it applies now (no series
// where none runs), and, while a stall it reported lasts, 1 with the report's one-line summary in
// label kStallReportLabel (the operator's condition Stalled quotes it).
inline constexpr char kStallLimitSeconds[] = "cifar_stall_limit_seconds";
inline constexpr char kStallReported[] = "cifar_stall_reported";
inline constexpr char kStallReportLabel[] = "report";

// Training (every trainer); status.progress reads the chief's.
inline constexpr char kSteps[] = "cifar_steps_total";
inline constexpr char kImages[] = "cifar_images_total";
inline constexpr char kDataWaitSeconds[] = "cifar_data_wait_seconds_total";
inline constexpr char kCheckpoints[] = "cifar_checkpoints_total";
inline constexpr char kLoss[] = "cifar_loss";
inline constexpr char kTrainAccuracy[] = "cifar_train_accuracy";
inline constexpr char kTestAccuracy[] = "cifar_test_accuracy";  // the evaluator's, if any
inline constexpr char kEpoch[] = "cifar_epoch";
// Where the job stands: its updates so far (a PS's version counts every trainer's) and in all;
// status.progress's step, progressPercentage and estimatedRemainingSeconds come from these.
inline constexpr char kJobStep[] = "cifar_job_step";
inline constexpr char kJobTotalSteps[] = "cifar_job_total_steps";
inline constexpr char kImagesPerSecond[] = "cifar_images_per_second";  // summed over trainers
inline constexpr char kStepSeconds[] = "cifar_step_seconds";
inline constexpr char kCheckpointSeconds[] = "cifar_checkpoint_seconds";
// The chief's checkpoints, written in the background: the newest step in the store (-1 until this
// process saved one), and since when
// (Unix seconds) the run's store has not answered, 0 while it does (status.progress.checkpoint
// and the condition CheckpointStoreUnreachable come from the chief's).
inline constexpr char kCheckpointSavedStep[] = "cifar_checkpoint_saved_step";
inline constexpr char kStoreUnreachableSince[] = "cifar_store_unreachable_since_seconds";
inline constexpr char kStoreRetries[] = "cifar_store_retries_total";
// Checkpoints that exist but cannot be read (the evaluator's: corrupt or truncated files).
inline constexpr char kCheckpointReadErrors[] = "cifar_checkpoint_read_errors_total";

// Parameter server: its trainers' side, then the shard's.
inline constexpr char kPsPushPullSeconds[] = "cifar_ps_push_pull_seconds";
inline constexpr char kPsPushBytes[] = "cifar_ps_push_bytes_total";
inline constexpr char kPsPullBytes[] = "cifar_ps_pull_bytes_total";
inline constexpr char kPsRetries[] = "cifar_ps_retries_total";
inline constexpr char kPsStaleness[] = "cifar_ps_staleness";
inline constexpr char kPsUpdates[] = "cifar_ps_updates_total";
inline constexpr char kPsReceivedBytes[] = "cifar_ps_received_bytes_total";
inline constexpr char kPsSentBytes[] = "cifar_ps_sent_bytes_total";
inline constexpr char kPsEvictions[] = "cifar_ps_evictions_total";
// Calls the PS's door refused, by reason (label kRefusalLabel): no_certificate,
// foreign_certificate (not the job's CA's), not_a_caller (a parameter server's own), token.
inline constexpr char kPsRefusedCalls[] = "cifar_ps_refused_calls_total";
inline constexpr char kRefusalLabel[] = "reason";
inline constexpr char kPsVersion[] = "cifar_ps_version";
inline constexpr char kPsMembers[] = "cifar_ps_members";
// Per trainer of the job (label `trainer`: its rank, the master 0, workers after it), from each
// PS's first shard stripe; the operator reads PS 0's into status.progress.trainers. Training: 1
// while the trainer takes part (it registered since the PS started, or the PS was restored
// mid-run, and it was not dropped since), else 0. Dropped at: the PS's version (the job's step)
// when it last dropped the trainer; no series until it first does.
inline constexpr char kTrainerLabel[] = "trainer";
inline constexpr char kPsTrainerTraining[] = "cifar_ps_trainer_training";
inline constexpr char kPsTrainerDroppedAtStep[] = "cifar_ps_trainer_dropped_at_step";

// All-reduce.
inline constexpr char kAllReduceBytes[] = "cifar_allreduce_bytes_total";
inline constexpr char kAllReduceSeconds[] = "cifar_allreduce_seconds";
inline constexpr char kAllReduceWaitSeconds[] = "cifar_allreduce_wait_seconds";
inline constexpr char kAllReduceOverlap[] = "cifar_allreduce_overlap_ratio";
// The group this rank trains in: its size and its rendezvous round (the store's number, from 0 at
// each store; an elastic job's operator takes the workers of the newest round for the world that
// trains now). A rank serves metrics only while it trains in a group.
inline constexpr char kAllReduceWorldSize[] = "cifar_allreduce_world_size";
inline constexpr char kAllReduceRound[] = "cifar_allreduce_round";

}  // namespace cifar::contract::metric
