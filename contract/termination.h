// What a cifar-train process leaves as it exits in its termination log (--termination-log; the
// operator passes the path Kubernetes reads, kPath): one JSON object with the run's final figures,
// under the names status.progress uses, or the error that ended it. The operator reads it from the
// pod's containerStatuses[].state.terminated.message, so a finished job's status carries the last
// figures after its pods stopped serving metrics, and a failed job says why in its own words.
#pragma once

#include <cstddef>
#include <string_view>

namespace cifar::contract::termination {

inline constexpr std::string_view kPath = "/dev/termination-log";
inline constexpr std::size_t kMaxBytes = 4096;  // what the kubelet keeps of the file

// Keys of the object. A trainer writes the figures it has (the chief also the step it saved), an
// evaluator the final test accuracy and the step it was measured at; a process that failed writes
// kError only.
inline constexpr std::string_view kEpoch = "epoch";
inline constexpr std::string_view kStep = "step";
inline constexpr std::string_view kLoss = "loss";
inline constexpr std::string_view kTrainAccuracy = "trainAccuracy";
inline constexpr std::string_view kTestAccuracy = "testAccuracy";
// The chief's: the step of the newest checkpoint it saved (its last, once it succeeded).
inline constexpr std::string_view kSavedStep = "savedStep";
inline constexpr std::string_view kError = "error";

}  // namespace cifar::contract::termination
