// What cifar-train's exit status means, to the operator's restart policy (ExitCode: codes of
// 128 and above, killed by a signal, are retried; the others are the job's own failure, except
// kExitStopped, which is no failure under any policy: the pod is replaced and not charged).
#pragma once

namespace cifar::contract {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // training failed (diverged, data missing, peer lost)
inline constexpr int kExitUsage = 2;   // arguments or env refused
// Asked to stop (SIGTERM: a drain, a preemption, a suspend, a deleted job) and stopped at a step
// boundary with the job's state saved, so that a replacement continues from that step.
inline constexpr int kExitStopped = 3;
// A pod of an older incarnation than its replacement (train/fence.h), left running on a cut-off
// node: it stopped without writing into the run. Its pod object is usually gone already.
inline constexpr int kExitReplaced = 4;
// The run's checkpoint store refused or did not answer (storage/: wrong credentials, no such
// bucket, an endpoint that does not answer, after retries): the job cannot keep its state. Never
// retried, under any policy: a restart would meet the same store (no crash loop that says nothing).
inline constexpr int kExitStoreUnavailable = 5;
// The dataset's source holds no dataset it can read, or refused (data/s3_fetch.h: an object
// missing or of the wrong size, wrong keys, no such bucket). Never retried either: a restart would
// read the same objects. (A source that did not answer is exit 1: a restart resumes the fetch.)
inline constexpr int kExitDataUnavailable = 6;
inline constexpr int kExitSignalBase = 128;  // 128 + signal: killed, worth a retry

constexpr bool is_retryable_exit(int code) { return code >= kExitSignalBase; }
// A refusal that no restart changes: the job fails at once, under any restartPolicy.
constexpr bool is_refusal(int code) {
  return code == kExitStoreUnavailable || code == kExitDataUnavailable;
}

}  // namespace cifar::contract
