// The PS role: this process's share of the parameters, served (server.h) until the master ends the
// job.
#pragma once

#include "config/train_config.h"

namespace cifar::ps {

// Runs this process's shard (config.distributed.job is a ps task): restores it from the newest
// checkpoint in the model dir when there is one (a restarted PS), else waits for the master's
// parameters; returns once the master has finished the job and the trainers have heard.
void run_parameter_server(const train::TrainConfig& config);

}  // namespace cifar::ps
