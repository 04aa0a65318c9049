// The training loop, written once: data, model, the learning-rate schedule, loss, backward,
// progress, metrics, epoch records, evaluation and checkpoints. What happens to the gradients
// after backward is the GradientExchange's (train/exchange.h).
#pragma once

#include "config/train_config.h"
#include "train/exchange.h"
#include "train/result.h"

namespace cifar::train {

// Trains this process's share of the configured job to its end (or --max-steps). Throws
// std::invalid_argument for options the data cannot satisfy, std::runtime_error when training
// cannot go on (divergence, a lost peer), and storage::S3Error when the run's store refused or
// stayed away too long: for the process that checkpoints, its message then ends with the newest
// checkpoint saved ("; the newest checkpoint saved is step N"), whichever write met the store.
TrainResult run_training(const TrainConfig& config, GradientExchange& exchange);

}  // namespace cifar::train
