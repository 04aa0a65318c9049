// The Prometheus endpoint of a training process, labelled with its run, role and index.
#pragma once

#include <memory>

#include "config/train_config.h"
#include "metrics/runtime_metrics.h"

namespace cifar::train {

// A local distributed job offsets each process's port by its place in the job, and ranks that
// share a machine by their local rank, so that they do not collide.
std::unique_ptr<metrics::RuntimeMetrics> make_runtime_metrics(const TrainConfig& config);

}  // namespace cifar::train
