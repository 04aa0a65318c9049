// The restarts backoffLimit counts, kept in the status so that they outlive the pods: a pod's
// in-place restarts (the kubelet's, under OnFailure) and its recreation after a failure are
// charged to the pod (status.podRestarts, by UID), and status.restarts is their sum. A pod the
// operator deletes, or that a node's loss takes, keeps what it was charged; the count never goes
// down, and the BackoffLimitExceeded message says the same number as status.restarts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "api/status.h"
#include "cifartrainjob/plan.h"

namespace cifar::op {

// The in-place restarts of `pod` that count: all the kubelet made, less the latest when it followed
// a refusal (contract::is_refusal: the store's or the dataset's): a refusal ends the job and is
// never retried, so that restart, the kubelet's alone (OnFailure), was no try of the job's.
int64_t chargeable_restarts(const nlohmann::json& pod);
// Charges every pod of `pods` its chargeable restarts as they stand (a charge is never lowered)
// and returns the new status.restarts.
int64_t count_restarts(const PodsByName& pods, JobStatus& status);
// Charges a failed pod's recreation: its in-place restarts and one more. Idempotent: a pod seen
// failed again before its deletion shows up is charged once.
int64_t charge_recreation(const nlohmann::json& pod, JobStatus& status);

}  // namespace cifar::op
