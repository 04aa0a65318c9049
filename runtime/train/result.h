// What a training run reports when it ends: how far it got, how fast, and where the step time
// went; and the lines it logs about that.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/monitor.h"

namespace cifar::train {

// Where the time of the training steps went (seconds, summed over the run).
struct TimeBreakdown {
  double data_wait = 0;
  double forward = 0;        // forward pass and loss
  double backward = 0;       // backward (all-reduce overlapped with it included)
  double communication = 0;  // exchanging with other processes after backward
  double optimizer = 0;      // the optimizer step in this process
  double other = 0;          // statistics, metrics, progress, checkpoints, evaluation
  [[nodiscard]] double total() const {
    return data_wait + forward + backward + communication + optimizer + other;
  }
};

struct TrainResult {
  int64_t epochs_completed = 0;
  int64_t steps = 0;        // the job's updates when this trainer stopped
  bool stopped = false;     // asked to stop (graceful_stop.h) before the end, the state saved
  bool evaluated = false;   // whether last_epoch has test figures (not where an evaluator has)
  int64_t saved_step = -1;  // the newest checkpoint this process saved (-1: none; only the chief's)
  EpochRecord last_epoch;   // the latest evaluation (a partial epoch's after --max-steps)
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

// The summary a run logs as it ends (bench/ scripts parse these lines).
std::vector<std::string> describe(const TrainResult& result);

}  // namespace cifar::train
