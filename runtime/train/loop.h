// The training loop, written once: data, model, the learning-rate schedule, loss, backward,
// progress, metrics, epoch records, evaluation and checkpoints. What happens to the gradients
// after backward is the GradientExchange's (train/exchange.h).
#pragma once

#include <optional>

#include "config/train_config.h"
#include "train/exchange.h"
#include "train/fence.h"
#include "train/graceful_stop.h"
#include "train/result.h"

namespace cifar::train {

// Trains this process's share of the configured job to its end (or --max-steps). Throws
// std::invalid_argument for options the data cannot satisfy, std::runtime_error when training
// cannot go on (divergence, a lost peer), and storage::S3Error when the run's store refused or
// stayed away too long: for the process that checkpoints, its message then ends with the newest
// checkpoint saved ("; the newest checkpoint saved is step N"), whichever write met the store.
// `fence`: the chief's (main claims it), behind which it records where it resumed and its epochs;
// the exchange's checkpoints have it too.
TrainResult run_training(const TrainConfig& config, GradientExchange& exchange, const Fence& fence);
// The same, with the run's stop window (train/graceful_stop.h) the caller's: opened from the
// first step and left open on return, so that a stop asked after the run (while the caller waits
// for peers, or closes) is a request too. On a throw it is as the run left it.
TrainResult run_training(const TrainConfig& config, GradientExchange& exchange, const Fence& fence,
                         std::optional<StopWindow>& stop_window);

}  // namespace cifar::train
