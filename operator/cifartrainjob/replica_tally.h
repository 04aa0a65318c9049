// The job's pods counted replica by replica under its restartPolicy: which exist, which run,
// which failed and whether that failure is retryable (Never: no failure is; OnFailure: every one
// is, the kubelet restarts in place and a failed pod is recreated; ExitCode: exit codes >= 128,
// signals and OOM kills, are, 1-127 are not). A pod that exited kExitStopped was interrupted (a
// drain, a node's shutdown) and saved the job's state: under every policy it is replaced, and it
// is no failure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/job.h"
#include "api/status.h"
#include "cifartrainjob/plan.h"

namespace cifar::op {

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
  std::vector<std::string> stopped;    // stopped on request, state saved: recreated, not charged
  std::optional<FailedPod> permanent;  // the failure that fails the job
  bool all_exist = true;               // every replica's pod, none terminating
  bool any_running = false;
};
// `leaving`: pods being deleted this round, counted as terminating.
ReplicaTally tally_replicas(const Job& job, const PodsByName& pods,
                            const std::set<std::string>& leaving = {});

}  // namespace cifar::op
