// The cifar-train flags the operator writes into a pod's arguments
// (operator/cifartrainjob/desired_state.cpp) and the runtime's CLI defines (cli/options.cpp).
// `name` is the spelling the operator writes, `alias` the other one the CLI also accepts.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace cifar::contract {

struct Flag {
  std::string_view name;
  std::string_view alias;
};

// CLI11's name list, short name first: "-m,--model", "--lr".
inline std::string cli_names(Flag flag) {
  if (flag.alias.empty()) return std::string(flag.name);
  const bool name_is_short = flag.name.substr(0, 2) != "--";
  const auto first = name_is_short ? flag.name : flag.alias;
  const auto second = name_is_short ? flag.alias : flag.name;
  return std::string(first) + "," + std::string(second);
}

namespace flag {
// Model, data and device.
inline constexpr Flag kModel{"-m", "--model"};
inline constexpr Flag kModelDir{"--model-dir", ""};
inline constexpr Flag kNumClasses{"--num-classes", ""};
inline constexpr Flag kEpochs{"-e", "--epochs"};
inline constexpr Flag kBatchSize{"-b", "--batch-size"};
inline constexpr Flag kContext{"-c", "--context"};
inline constexpr Flag kPrecision{"--precision", ""};
inline constexpr Flag kDataset{"-d", "--dataset"};
inline constexpr Flag kDataDir{"--data-dir", ""};
inline constexpr Flag kDownload{"--download", ""};
// The dataset in object storage (dataset.uri), fetched into --data-dir.
inline constexpr Flag kDataUri{"--data-uri", ""};
inline constexpr Flag kDownloadMirror{"--download-mirror", ""};
// Optimisation.
inline constexpr Flag kOptimizer{"--optimizer", ""};
inline constexpr Flag kLearningRate{"--lr", ""};
inline constexpr Flag kMomentum{"--momentum", ""};
inline constexpr Flag kNoNesterov{"--no-nesterov", ""};
inline constexpr Flag kWeightDecay{"--weight-decay", ""};
inline constexpr Flag kSchedule{"--schedule", ""};
inline constexpr Flag kWarmupEpochs{"--warmup-epochs", ""};
inline constexpr Flag kLabelSmoothing{"--label-smoothing", ""};
inline constexpr Flag kSeed{"--seed", "-s"};
// Checkpoints and reporting.
inline constexpr Flag kCheckpointEvery{"--checkpoint-every", ""};
inline constexpr Flag kKeepCheckpoints{"--keep-checkpoints", ""};
inline constexpr Flag kMaxUnsavedSeconds{"--max-unsaved-seconds", ""};
inline constexpr Flag kMetricsPort{"--metrics-port", ""};
inline constexpr Flag kProgress{"--progress", ""};
inline constexpr Flag kMetricsLinger{"--metrics-linger", ""};
inline constexpr Flag kTerminationLog{"--termination-log", ""};
// The stall watchdog's limit (runtime/health/watchdog.h): a trainer's
// runPolicy.stallTimeoutSeconds.
inline constexpr Flag kStallSeconds{"--stall-seconds", ""};
// ... and its floor until the first step: runPolicy.stallStartupSeconds.
inline constexpr Flag kStallStartupSeconds{"--stall-startup-seconds", ""};
// Strategies.
inline constexpr Flag kStrategy{"--strategy", ""};
inline constexpr Flag kPsMode{"--ps-mode", ""};
inline constexpr Flag kStaleness{"--staleness", ""};
inline constexpr Flag kDistBackend{"--dist-backend", ""};
inline constexpr Flag kBucketCapMb{"--bucket-cap-mb", ""};
inline constexpr Flag kNoOverlap{"--no-overlap", ""};
inline constexpr Flag kDistTimeout{"--dist-timeout", ""};
// An elastic job: replicaSpecs.Worker.minReplicas (all-reduce), 1 + that (parameter server: the
// master counts).
inline constexpr Flag kMinRanks{"--min-ranks", ""};
inline constexpr Flag kMinTrainers{"--min-trainers", ""};

inline constexpr std::array kAll = {kModel,           kModelDir,
                                    kNumClasses,      kEpochs,
                                    kBatchSize,       kContext,
                                    kDataset,         kDataDir,
                                    kDownload,        kDownloadMirror,
                                    kDataUri,         kOptimizer,
                                    kLearningRate,    kMomentum,
                                    kNoNesterov,      kWeightDecay,
                                    kSchedule,        kWarmupEpochs,
                                    kLabelSmoothing,  kSeed,
                                    kCheckpointEvery, kKeepCheckpoints,
                                    kMetricsPort,     kProgress,
                                    kMetricsLinger,   kStrategy,
                                    kPsMode,          kStaleness,
                                    kDistBackend,     kBucketCapMb,
                                    kNoOverlap,       kDistTimeout,
                                    kMinRanks,        kPrecision,
                                    kTerminationLog,  kMaxUnsavedSeconds,
                                    kStallSeconds,    kStallStartupSeconds,
                                    kMinTrainers};

// Not in kAll (the flags the operator writes): the parameter-server channel's TLS, the job's
// credentials (the operator gives them by env::kTlsDir instead) or plaintext (never on Kubernetes).
inline constexpr Flag kTlsDir{"--tls-dir", ""};
inline constexpr Flag kInsecure{"--insecure", ""};
}  // namespace flag

// --metrics-linger for a job's pods: a trainer whose loss turns NaN or infinite keeps serving it
// this long before it exits, so that the CifarTrainLossNaN alert sees it. Two scrape intervals of
// deploy/prometheus (15 s): a scrape lands within the first, and the sample it took is still the
// latest at the next rule evaluation (every 15 s too) before the exit makes the series stale.
inline constexpr int kMetricsLingerSeconds = 30;

}  // namespace cifar::contract
