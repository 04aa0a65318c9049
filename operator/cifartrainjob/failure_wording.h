// How a failure reads in the job's status and Events: the exit code, and what the pod said of it
// (its termination log, or the end of its log).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cifartrainjob/plan.h"

namespace cifar::op {

// "exit code 137", or "no exit code (evicted or lost)".
std::string describe_exit(const std::optional<int>& code);
// What a failed pod said of its failure: ": <the error in its termination log>", else ": <the
// last line of its log>" (terminationMessagePolicy FallbackToLogsOnError), shortened; "" if
// nothing (or no pod).
std::string failure_detail(const nlohmann::json* pod);
// Of the pods restarted in place (restartPolicy OnFailure), the one whose container ended last,
// and what it said ("; the last, pod x, failed with ..."): a job that fails for restarting too
// often says why it restarted. "" if none restarted.
std::string last_in_place_failure(const PodsByName& pods);

}  // namespace cifar::op
