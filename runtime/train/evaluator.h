// The evaluator role: evaluates the job's newest checkpoint on the test set whenever a new one
// appears, exports the test accuracy, keeps a copy of the best checkpoint, and returns once the
// chief has marked the job done and its final checkpoint has been evaluated.
#pragma once

#include <cstdint>

#include "config/train_config.h"
#include "train/fence.h"

namespace cifar::train {

struct EvaluatorResult {
  int64_t evaluated = 0;  // checkpoints evaluated
  int64_t last_step = -1;
  double last_accuracy = 0;
  double best_accuracy = 0;
  int64_t best_step = -1;
};

// Its records and best model are written behind `fence` (the evaluator slot's: train/fence.h).
EvaluatorResult run_evaluator(const TrainConfig& config, const Fence& fence);

}  // namespace cifar::train
