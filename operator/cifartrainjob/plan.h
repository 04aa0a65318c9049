// What one reconcile reads (Observed) and what it decides (Plan), and the small helpers every
// phase uses to add to a plan. The phases' headers include this, never reconcile.h: reconcile.h
// is the one function above them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/status.h"
#include "cifartrainjob/liveness.h"
#include "framework/clock.h"
#include "framework/kueue.h"
#include "framework/node_status.h"

namespace cifar::op {

struct Observed {
  std::vector<nlohmann::json> pods;  // the job's pods: its label, and this job as controller
  // Pods with the job's label that this job does not control (an orphan of an earlier job of the
  // same name, a user's own pod), by name: never adopted, and a name they hold is not created.
  std::map<std::string, std::string> foreign_pods;  // name -> who controls it
  bool service_exists = false;
  // The progress scraper's newest status.progress for the job (progress.h), if it has one: the
  // reconcile writes it, so that the status has one writer.
  std::optional<nlohmann::json> progress;
  // What the progress scraper last heard from the job's pods (liveness.h): the stall rule's input.
  JobLiveness liveness;
  // The nodes of the job's pods that are in trouble (not Ready, or out of service), by name.
  NodeTroubles troubled_nodes;
  // A job with a queue: the Kueue Workload of its pod group, if there is one; `workload_known` is
  // false until the cache of Workloads has synced (nothing is decided from its absence before).
  std::optional<kueue::WorkloadState> workload;
  bool workload_known = true;
  // An elastic job's workers above minReplicas are groups of their own (kueue_integration.h):
  // their Workloads, by worker index, those Kueue has made.
  std::map<int, kueue::WorkloadState> worker_workloads;
  // The job's pods deleted since the last round that were killed at the end of their grace
  // period, as the API server last showed them (unsaved_stop.h): nowhere else is their end seen.
  std::vector<nlohmann::json> deleted_pods;
};

struct EventRecord {
  std::string type;  // Normal | Warning
  std::string reason;
  std::string message;
};

struct Plan {
  // The job's own objects, made once, before its pods: the token Secret (its random value is the
  // apply layer's), the NetworkPolicy, then the headless Service, whose existence says all three
  // were made.
  bool create_token_secret = false;
  std::optional<nlohmann::json> create_network_policy;
  std::optional<nlohmann::json> create_service;
  std::vector<nlohmann::json> create_pods;
  std::vector<std::string> delete_pods;  // names
  // Pods on a lost node, deleted for good (grace period 0): the API server forgets them at once,
  // without their node's word. Recreated in a later round, once the cache shows them gone.
  std::vector<std::string> force_delete_pods;
  // Pods the operator replaces under their own name whose Kueue finalizer it takes off: Kueue holds
  // a failed pod of a group until a replacement appears, and the replacement, of the same name,
  // cannot be created while it is there.
  std::vector<std::string> release_pods;
  // Kueue Workloads of admissions that ended (the group was preempted, suspended, or all its pods
  // ended): deleted before their pods are created again, which then queue as a new group.
  std::vector<std::string> delete_workloads;
  JobStatus status;  // the job's whole new status
  // The restarts backoffLimit counts, status.restarts as this round leaves it (restart_count.h),
  // for the operator's metrics.
  int64_t restarts = 0;
  bool delete_job = false;  // ttlSecondsAfterFinished has passed
  std::optional<std::chrono::seconds> requeue_after;
  std::vector<EventRecord> events;
};

// The job's pods, by name.
using PodsByName = std::map<std::string, nlohmann::json>;

inline PodsByName pods_by_name(const std::vector<nlohmann::json>& pods) {
  PodsByName by_name;
  for (const auto& p : pods) by_name[p["metadata"]["name"].get<std::string>()] = p;
  return by_name;
}

// Whether a phase ended the round (kDone) or the next phase runs (kContinue).
enum class PhaseResult { kContinue, kDone };

inline const nlohmann::json* find_pod(const PodsByName& pods, const std::string& name) {
  const auto found = pods.find(name);
  return found == pods.end() ? nullptr : &found->second;
}

inline bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Look again after `after` (or sooner, if an earlier phase asked for that).
inline void look_again_in(Plan& plan, std::chrono::seconds after) {
  after = std::max(after, std::chrono::seconds(1));
  if (!plan.requeue_after || *plan.requeue_after > after) plan.requeue_after = after;
}

// Whole seconds from `now` until `when`, rounded up: a look at that time finds it passed.
inline std::chrono::seconds seconds_until(Time when, Clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::seconds>(when - now) + std::chrono::seconds(1);
}

}  // namespace cifar::op
