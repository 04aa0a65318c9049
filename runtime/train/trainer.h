// Single-process training: data, model, optimiser, schedule, evaluation, checkpoints, reporting.
#pragma once

#include <cstdint>

#include "train/config.h"
#include "train/monitor.h"

namespace cifar::train {

// Where the time of the training steps went (seconds, summed over the run).
struct TimeBreakdown {
  double data_wait = 0;
  double forward = 0;  // forward pass and loss
  double backward = 0;
  double optimizer = 0;  // learning-rate update and optimizer step
  double other = 0;      // statistics, metrics, progress, step-checkpoints
  [[nodiscard]] double total() const { return data_wait + forward + backward + optimizer + other; }
};

struct TrainResult {
  int64_t epochs_completed = 0;
  int64_t steps = 0;
  EpochRecord last_epoch;  // the latest evaluation (a partial epoch's after --max-steps)
  double best_test_accuracy = 0;
  double images_per_second = 0;  // over this process's training steps
  // Over the steps after the first kWarmupSteps of this process (allocator and kernel warm-up).
  double steady_images_per_second = 0;
  static constexpr int64_t kWarmupSteps = 3;
  TimeBreakdown time;
};

// Images per second of this process's steps, over all of them and after the warm-up ones.
class ThroughputMeter {
 public:
  void add_step(int64_t images, double seconds);
  // Sets result.images_per_second (over result.time.total()) and steady_images_per_second.
  void report(TrainResult& result) const;

 private:
  int64_t steps_ = 0;
  int64_t images_ = 0;
  int64_t steady_images_ = 0;
  double steady_seconds_ = 0;
};

class DataParallel;

// Runs the configured training to completion (or --max-steps). Throws on bad data or options.
// With `parallel`, this process is one rank of a data-parallel job: it trains on its shard of
// each epoch with gradients averaged over the ranks; only rank 0 writes checkpoints and records.
TrainResult run_training(const TrainConfig& config, DataParallel* parallel = nullptr);

}  // namespace cifar::train
