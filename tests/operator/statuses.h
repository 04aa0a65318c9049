// Job statuses the reconcile tests start from.
#pragma once

#include "api/status.h"
#include "framework/clock.h"

namespace cifar::op::testing {

// A job whose pods run since `since`, nothing restarted.
inline JobStatus running_since(Clock::time_point since) {
  JobStatus status;
  status.set_state(ConditionType::kRunning, reason::kJobRunning, "running", to_time(since));
  status.start_time = to_time(since);
  status.restarts = 0;
  return status;
}

}  // namespace cifar::op::testing
