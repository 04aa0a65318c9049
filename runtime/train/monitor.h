// model-dir/monitor.jsonl: one JSON object per epoch, appended and flushed as each epoch ends.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>

namespace cifar::train {

struct EpochRecord {
  int64_t epoch = 0;  // 1-based
  int64_t step = 0;   // optimizer steps so far
  double train_loss = 0;
  double train_accuracy = 0;
  double test_loss = 0;
  double test_accuracy = 0;
  double learning_rate = 0;
  double images_per_second = 0;
  double seconds = 0;  // wall time of the epoch's training (evaluation excluded)
};

class MonitorLog {
 public:
  explicit MonitorLog(const std::filesystem::path& model_dir);
  void append(const EpochRecord& record);
  // Drops records of epochs after `epoch` (a resumed run redoes them).
  static void truncate_after(const std::filesystem::path& model_dir, int64_t epoch);

  static constexpr const char* kFileName = "monitor.jsonl";

 private:
  std::ofstream out_;
};

}  // namespace cifar::train
