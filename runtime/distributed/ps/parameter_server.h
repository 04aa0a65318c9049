// The PS role: this process's share of the parameters, served (server.h) until the master ends the
// job.
#pragma once

#include <chrono>

#include "config/train_config.h"

namespace cifar::ps {

// Runs this process's shard (config.distributed.job is a ps task): restores it from the newest
// checkpoint in the model dir when there is one (a restarted PS), else waits for the master's
// parameters; returns once the master has finished the job and the trainers have heard
// (contract::kExitOk). Asked to stop (train/graceful_stop.h), it serves on until the master has
// gathered the shard's state for its checkpoint, or kStopBound has passed (contract::kExitStopped).
int run_parameter_server(const train::TrainConfig& config);

// How long a PS asked to stop waits for the master's checkpoint: inside Kubernetes' default grace
// period of 30 s, with time left to shut the server down.
inline constexpr std::chrono::seconds kStopBound{20};

}  // namespace cifar::ps
