// The all-reduce trainer role: every rank runs the training loop (train/loop.h) on its share of
// each epoch, with gradients averaged by c10d (gradient_buckets.h) and rank 0 broadcasting the
// initial parameters, writing checkpoints and reports, and telling the evaluator when it is done.
#pragma once

#include "config/train_config.h"
#include "train/fence.h"
#include "train/result.h"

namespace cifar::allreduce {

train::TrainResult run_allreduce_trainer(const train::TrainConfig& config,
                                         const train::Fence& fence);

}  // namespace cifar::allreduce
