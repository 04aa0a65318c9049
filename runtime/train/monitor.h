// monitor.jsonl in the run's store (its -md: a directory or s3://...): one JSON object per epoch,
// written as each epoch ends.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/fence.h"
#include "train/json_lines.h"

namespace cifar::train {

// Which samples an epoch trained, over every trainer that steps together: how many, and the sums
// of their dataset indices and of the squares of those. An epoch that trains each sample of the
// indices 0..N-1 once has N, N(N-1)/2 and (N-1)N(2N-1)/6; one that drops a sample or trains one
// twice has other figures (a drop and a repeat that kept both sums would have to be two pairs).
struct SampleTally {
  int64_t count = 0;
  int64_t index_sum = 0;
  int64_t index_square_sum = 0;
  static SampleTally of(const std::vector<int64_t>& indices);
  SampleTally& operator+=(const SampleTally& other);
  bool operator==(const SampleTally& other) const {
    return count == other.count && index_sum == other.index_sum &&
           index_square_sum == other.index_square_sum;
  }
};

struct EpochRecord {
  int64_t epoch = 0;  // 1-based
  int64_t step = 0;   // optimizer steps so far
  double train_loss = 0;
  double train_accuracy = 0;
  double test_loss = 0;
  double test_accuracy = 0;
  double learning_rate = 0;
  double images_per_second = 0;
  double seconds = 0;                  // wall time of the epoch's training (evaluation excluded)
  std::optional<SampleTally> samples;  // when the exchange knows them (not a PS trainer's)
};

class MonitorLog {
 public:
  // The log of the run at `model_dir`, with what it holds already.
  explicit MonitorLog(const std::string& model_dir);
  // The log in `store` (the run's: train/run_store.h), appended to in the background behind the
  // chief's `fence`.
  MonitorLog(std::shared_ptr<storage::Store> store, Fence fence);
  void append(const EpochRecord& record);
  // Until every record appended is in the store; and whether a write of it failed.
  void wait_until_saved() { log_.wait_until_saved(); }
  void raise_if_failed() { log_.raise_if_failed(); }
  // Drops records of epochs after `epoch` (a resumed run redoes them).
  void truncate_after(int64_t epoch);

  static constexpr const char* kFileName = "monitor.jsonl";

 private:
  JsonLinesObject log_;
};

}  // namespace cifar::train
