// <model-dir>/<run>.done: written by the chief when the job is done ({"step": N}, the step its
// final checkpoint was saved under); the evaluator stops once it has evaluated that step, and a new
// run of the same job removes it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "config/train_config.h"

namespace cifar::train {

std::filesystem::path done_marker_path(const TrainConfig& config);
void write_done_marker(const TrainConfig& config, int64_t final_step);
// The final step, or nothing while there is no marker (or it is being written).
std::optional<int64_t> read_done_marker(const std::filesystem::path& path);

}  // namespace cifar::train
