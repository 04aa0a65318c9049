// The PS trainer roles: master (the chief: initialises the shards, checkpoints, records progress
// and ends the job) and worker. Both compute gradients on their share of each epoch and exchange
// them for fresh parameters with the PS shards.
#pragma once

#include "config/train_config.h"
#include "train/fence.h"
#include "train/result.h"

namespace cifar::ps {

train::TrainResult run_ps_trainer(const train::TrainConfig& config, const train::Fence& fence);

}  // namespace cifar::ps
