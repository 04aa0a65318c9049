// Learning rate as a pure function of the step, so a resumed run gets exactly the same rates.
#pragma once

#include <cstdint>

#include "config/schedule_options.h"

namespace cifar::train {

// `step` counts optimizer updates from 0; `steps_per_epoch` converts the epoch-based options.
double learning_rate(const ScheduleOptions& options, int64_t step, int64_t steps_per_epoch,
                     int64_t total_steps);

}  // namespace cifar::train
