#include "train/train_state.h"

#include <algorithm>

namespace cifar::train {

void TrainState::add_batch(double loss, int64_t correct, int64_t images, double seconds) {
  epoch_loss_sum += loss * static_cast<double>(images);
  epoch_correct += correct;
  epoch_seen += images;
  epoch_seconds += seconds;
}

double TrainState::running_accuracy() const {
  return epoch_seen > 0 ? static_cast<double>(epoch_correct) / static_cast<double>(epoch_seen) : 0;
}

double TrainState::running_images_per_second() const {
  return epoch_seconds > 0 ? static_cast<double>(epoch_seen) / epoch_seconds : 0;
}

EpochRecord TrainState::epoch_record(int64_t epoch_number, double learning_rate) const {
  const double seen = static_cast<double>(std::max<int64_t>(epoch_seen, 1));
  EpochRecord record;
  record.epoch = epoch_number;
  record.step = step;
  record.train_loss = epoch_loss_sum / seen;
  record.train_accuracy = static_cast<double>(epoch_correct) / seen;
  record.learning_rate = learning_rate;
  record.images_per_second = running_images_per_second();
  record.seconds = epoch_seconds;
  record.samples = epoch_samples;
  return record;
}

void TrainState::start_epoch_after(int64_t epochs_completed) {
  epoch = epochs_completed;
  batch_in_epoch = 0;
  epoch_loss_sum = 0;
  epoch_correct = 0;
  epoch_seen = 0;
  epoch_seconds = 0;
  epoch_samples.reset();
}

}  // namespace cifar::train
