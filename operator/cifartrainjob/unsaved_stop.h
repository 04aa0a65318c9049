// A pod deleted on purpose (a suspend, a drain, a preemption) gets SIGTERM and its grace period to
// stop at a step boundary and save the job's state (docs/ARCHITECTURE.md, "Graceful stop"). One
// the kubelet killed when that period ran out did not save: the job goes on from its last
// periodic checkpoint and loses the steps since, and an Event says so. The operator sees such an
// end only on the pod as it was deleted, so the controller hands these pods to the reconcile
// (Observed::deleted_pods).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "api/job.h"
#include "cifartrainjob/plan.h"

namespace cifar::op {

// Whether a pod, as the API server last showed it, was deleted and then killed by SIGKILL (exit
// 137, not the kernel's OOM killer): the grace period's end. Cheap: the controller asks it of
// every deleted pod.
bool killed_at_end_of_grace(const nlohmann::json& pod);

// The Warning Event for a deleted pod of `job` that was killed at the end of its grace period, if
// its role takes part in the save: the chief (which writes the checkpoint) and, in a
// parameter-server job, the parameter servers (whose state it writes). A PS job's workers hold no
// state and the evaluator saves nothing.
std::optional<EventRecord> unsaved_stop_event(const Job& job, const nlohmann::json& deleted_pod);

}  // namespace cifar::op
