// What the progress scraper last heard from each of a job's pods: their heartbeat and their stall
// watchdog's word (contract/metrics.h), and when they last answered. The stall rule (stall.h)
// reads it; the controller keeps it in memory (an operator that restarts hears the pods anew).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "framework/clock.h"

namespace cifar::op {

// What the progress scraper last heard from one of a job's pods.
struct PodLiveness {
  std::string uid;                    // the pod it heard (a pod made again under its name is new)
  int64_t steps = 0;                  // its own steps so far (cifar_steps_total)
  double seconds_since_progress = 0;  // as it said at its last answer
  double stall_limit_seconds = 0;     // its watchdog's limit (0: none runs: a PS, an evaluator)
  std::string stall_report;           // the summary of the stall it reported, while that lasts
  // Its last answer; none: it has not answered yet (it may have stopped before its first scrape).
  std::optional<Clock::time_point> answered_at;
  int missed_scrapes = 0;  // scrapes in a row it did not answer since
};
using JobLiveness = std::map<std::string, PodLiveness>;  // by pod name
using MissedPods = std::map<std::string, std::string>;   // pod name -> its UID

// A pod that missed this many scrapes in a row has stopped answering (one may be lost to load).
inline constexpr int kSilentAfterMissed = 2;

// Takes a scrape round into what is known of a job's pods: the answers replace the records of
// their pods, a miss counts against the pod's record (a pod missed before it ever answered gets a
// record of its misses alone). Returns whether the round changed what the stall rule reads from
// other than time: a stall reported or over, a pod that fell silent or answers again.
bool merge_heard(JobLiveness& known, const JobLiveness& answered, const MissedPods& missed);

}  // namespace cifar::op
