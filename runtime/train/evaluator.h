// The evaluator role: evaluates the job's newest checkpoint on the test set whenever a new one
// appears, exports the test accuracy, keeps a copy of the best checkpoint, and returns once the
// chief has marked the job done and its final checkpoint has been evaluated.
#pragma once

#include <cstdint>
#include <filesystem>

#include "train/config.h"

namespace cifar::train {

struct EvaluatorResult {
  int64_t evaluated = 0;  // checkpoints evaluated
  int64_t last_step = -1;
  double last_accuracy = 0;
  double best_accuracy = 0;
  int64_t best_step = -1;
};

EvaluatorResult run_evaluator(const TrainConfig& config);

// <model-dir>/<run>.done, written by the chief when the job is done: {"step": N}.
std::filesystem::path done_marker_path(const TrainConfig& config);
void write_done_marker(const TrainConfig& config, int64_t final_step);

}  // namespace cifar::train
