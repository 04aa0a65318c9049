// A stall report: why the process counts as stalled, what it waits on, and every thread's stack.
// Made from facts (pure), so that its form is tested without a stalled process.
#pragma once

#include <string>
#include <vector>

#include "health/heartbeat.h"
#include "health/thread_stacks.h"
#include "health/waits.h"

namespace cifar::health {

struct StallFacts {
  std::string who;  // "worker 1", "rank 0"
  int pid = 0;
  double limit_seconds = 0;
  std::string limit_rule;  // how the limit was set ("--stall-seconds 30", "10 x the longest ...")
  ProgressState progress;
  Waits waits;
  std::vector<ThreadStack> stacks;
};

// The whole report, many lines.
[[nodiscard]] std::string format_stall_report(const StallFacts& facts);
// One line for the pod's termination message: the oldest wait and where the main thread is.
[[nodiscard]] std::string summarize_stall(const StallFacts& facts);

}  // namespace cifar::health
