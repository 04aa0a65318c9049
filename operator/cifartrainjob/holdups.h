// What holds a job's pods back, reported as condition PodsNotReady (with status.reason/message
// and an Event), and the run policy's deadlines on it: a pod that has not started
// runPolicy.startupDeadlineSeconds after its creation, or that is still terminating
// runPolicy.terminatingDeadlineSeconds after its grace period, fails the job; a waiting reason
// that cannot heal (InvalidImageName) fails it at once.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/job.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"
#include "framework/node_status.h"

namespace cifar::op {

// A pod that holds the job back: one waiting for something (the scheduler, an image, a Secret:
// pod_waiting's reason and message), one that has not started yet (reason ""), one deleted and
// still there (PodStuckTerminating), or one on a node in trouble (NodeLost: no deadline, it is
// replaced).
struct Holdup {
  std::string pod;
  std::string reason;
  std::string message;
  std::optional<Time> since;     // created (not started yet), or when its grace period ended
  std::optional<Time> fails_at;  // when it fails the job, if it does (the run policy's deadlines)
  bool permanent = false;        // a reason no wait heals: it fails the job at once
  std::string node;              // NodeLost: the pod's node
  std::optional<NodeTrouble> node_trouble;                          // and what is wrong with it
  [[nodiscard]] std::string describe(Clock::time_point now) const;  // "pod x is waiting: ..."
};
// When Kueue admitted a pod's group, if it did (nullptr: no queue).
using AdmittedSince = std::function<std::optional<Time>(const nlohmann::json& pod)>;
// `foreign` names held by pods the job does not control come first (reason NotOwned). A pod's
// startup deadline counts from its creation, or from `admitted_since` (Kueue admitted its group)
// if that is later: a pod gated in a queue has not begun to start.
std::vector<Holdup> find_holdups(const Job& job, const PodsByName& pods,
                                 const std::map<std::string, std::string>& foreign = {},
                                 const NodeTroubles& troubled = {},
                                 const AdmittedSince& admitted_since = nullptr);
// Ends the job on a holdup past its deadline or one that cannot heal; otherwise sets condition
// PodsNotReady from the first holdup with a reason (a Warning Event when that is news), or turns it
// False when nothing holds the pods, and asks to look again at the next deadline.
void report_holdups(const Job& job, const PodsByName& pods,
                    const std::map<std::string, std::string>& foreign, const NodeTroubles& troubled,
                    Clock::time_point now, Plan& plan,
                    const AdmittedSince& admitted_since = nullptr);

}  // namespace cifar::op
