// A trainer's stall watchdog (health/watchdog.h) as a run configures it: named after its task,
// reports beside the run's checkpoints (a directory run; an object-store run logs them only) and,
// in one line, in the pod's termination message; quiet during a graceful stop.
#pragma once

#include <memory>

#include "config/train_config.h"
#include "health/watchdog.h"

namespace cifar::train {

// None for a parameter server or an evaluator (they wait for trainers by design; their heartbeat
// is exported all the same), or with --stall-seconds -1.
std::unique_ptr<health::StallWatchdog> watch_for_stalls(const TrainConfig& config);

}  // namespace cifar::train
