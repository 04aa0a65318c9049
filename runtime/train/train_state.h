// Where training stands: the counters and the current epoch's running statistics that a
// checkpoint saves and a resumed run continues from.
#pragma once

#include <cstdint>
#include <optional>

#include "train/monitor.h"

namespace cifar::train {

// Where training stands. Running sums of the current epoch are kept so that an epoch resumed
// in the middle reports the same loss and accuracy as an uninterrupted one.
struct TrainState {
  int64_t epoch = 0;           // epochs completed
  int64_t step = 0;            // the job's updates completed (optimizer steps, a PS's version)
  int64_t batch_in_epoch = 0;  // batches of epoch `epoch + 1` completed
  double epoch_loss_sum = 0;
  int64_t epoch_correct = 0;
  int64_t epoch_seen = 0;
  double epoch_seconds = 0;
  double best_test_accuracy = 0;
  // The samples the epoch trained so far over every trainer (UpdateResult::samples), when
  // known.
  std::optional<SampleTally> epoch_samples;
  // Read from a checkpoint: the incarnation of the pod that saved it (fence.h; 0: none).
  int64_t written_by = 0;

  // Adds one training batch to the epoch's running sums.
  void add_batch(double loss, int64_t correct, int64_t images, double seconds);
  [[nodiscard]] double running_accuracy() const;
  [[nodiscard]] double running_images_per_second() const;
  // The record of the epoch so far, numbered `epoch` (1-based); test fields are the caller's.
  [[nodiscard]] EpochRecord epoch_record(int64_t epoch, double learning_rate) const;
  // `epochs_completed` are done: the running sums start over for the next one.
  void start_epoch_after(int64_t epochs_completed);
};

}  // namespace cifar::train
