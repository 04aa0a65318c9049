// Training progress for people: a redrawn bar on a terminal, plain lines in logs.
#pragma once

#include <cstdint>
#include <string>

#include "train/monitor.h"

namespace cifar::train {

class Progress {
 public:
  enum class Mode { kBar, kLines, kNone };
  // "auto" picks the bar when stdout is a terminal.
  static Mode parse_mode(const std::string& option);

  Progress(Mode mode, int64_t steps_per_epoch, int64_t total_epochs, int64_t log_every_steps);

  void begin_epoch(int64_t epoch);
  struct Snapshot {
    int64_t batch = 0;  // batches of this epoch done
    int64_t step = 0;   // global step
    double loss = 0;
    double accuracy = 0;
    double images_per_second = 0;
    double learning_rate = 0;
  };
  // Whether `update` would print at this batch (callers skip reading stats otherwise).
  [[nodiscard]] bool wants(int64_t batch) const;
  void update(const Snapshot& snapshot);
  void end_epoch(const EpochRecord& record);

 private:
  Mode mode_;
  int64_t steps_per_epoch_;
  int64_t total_epochs_;
  int64_t log_every_;
  int64_t epoch_ = 0;
};

}  // namespace cifar::train
