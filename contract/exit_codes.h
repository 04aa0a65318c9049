// What cifar-train's exit status means, to the operator's restart policy (ExitCode: codes of
// 128 and above, killed by a signal, are retried; the others are the job's own failure).
#pragma once

namespace cifar::contract {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;        // training failed (diverged, data missing, peer lost)
inline constexpr int kExitUsage = 2;         // arguments or env refused
inline constexpr int kExitSignalBase = 128;  // 128 + signal: killed, worth a retry

constexpr bool is_retryable_exit(int code) { return code >= kExitSignalBase; }

}  // namespace cifar::contract
