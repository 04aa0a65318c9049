// <run>.done in the run's store: written by the chief when the job is done ({"step": N}, the step
// its final checkpoint was saved under); the evaluator stops once it has evaluated that step, and
// a new run of the same job removes it.
#pragma once

#include <cstdint>
#include <optional>

#include "config/train_config.h"
#include "train/fence.h"

namespace cifar::storage {
class Store;
}

namespace cifar::train {

// Behind the chief's `fence`.
void write_done_marker(const TrainConfig& config, const Fence& fence, int64_t final_step);
// The final step, or nothing while there is no marker; in the run's store `store`.
std::optional<int64_t> read_done_marker(const storage::Store& store, const TrainConfig& config);
void remove_done_marker(const TrainConfig& config);

}  // namespace cifar::train
