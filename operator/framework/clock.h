// The operator's one clock convention. Two clocks, never mixed:
// - Clock (the system clock): wall time, for what is written to or read from the API server (a
//   job's status times, Events, Lease times) and for the reconcile's `now`. The API stores times
//   in whole seconds (metav1.Time, `Time` here) or microseconds (metav1.MicroTime, Leases).
// - Steady (the steady clock): intervals that must not jump with the wall clock (delays and
//   backoffs of the work queue, expectations' expiry, how long a Lease went unchanged, sleeps).
//   Never written anywhere.
#pragma once

#include <chrono>
#include <string>

namespace cifar::op {

using Clock = std::chrono::system_clock;
using Steady = std::chrono::steady_clock;

// A metav1.Time: whole seconds, the precision the API keeps.
using Time = std::chrono::time_point<Clock, std::chrono::seconds>;

// `t` to the second (truncated), as it will read back from the API.
Time to_time(Clock::time_point t);

// RFC 3339 in UTC, whole seconds: "2026-11-22T15:04:05Z". parse_time reads that form (what
// format_time writes) and throws std::invalid_argument for anything else.
std::string format_time(Clock::time_point t);
Time parse_time(const std::string& text);

// A metav1.MicroTime: "2026-11-22T15:04:05.000042Z".
std::string format_micro_time(Clock::time_point t);

}  // namespace cifar::op
