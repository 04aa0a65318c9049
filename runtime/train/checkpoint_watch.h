// What the evaluator watches: a run's checkpoints, the newest as the chief writes them. Each poll
// lists the run and downloads the newest checkpoint only if it is one not fetched before (the
// names carry the step, zero-padded, so their order is the steps'): a listing that names nothing
// new costs no GET. A checkpoint that a replaced chief wrote after its replacement took over
// (fence.h, is_stale_checkpoint) is passed over, and one that cannot be read (corrupt, truncated)
// is said once and never tried again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "config/train_config.h"
#include "train/checkpoint.h"
#include "train/train_state.h"

namespace cifar::metrics {
class RuntimeMetrics;
}

namespace cifar::train {

class CheckpointWatch {
 public:
  // `metrics` counts the checkpoints that cannot be read.
  CheckpointWatch(std::shared_ptr<storage::Store> store, const TrainConfig& config,
                  metrics::RuntimeMetrics& metrics);

  struct Loaded {
    TrainState state;
    std::string bytes;  // the checkpoint as stored (the best model is a copy of it)
  };
  // The newest checkpoint of the run loaded into `model`, if it is one this watch has not fetched
  // before and its step is past `after`; nullopt if there is none such now. Store errors
  // (storage::S3Error) and Replaced pass through: they are not the checkpoint's fault.
  std::optional<Loaded> next(torch::nn::Module& model, int64_t after);
  // Throws std::runtime_error if the run's newest checkpoint (once the job is done, its final
  // one) is one that cannot be read: nothing newer will come. `last_step`: the last evaluated.
  void expect_newest_readable(int64_t last_step) const;

 private:
  std::shared_ptr<storage::Store> store_;
  const TrainConfig& config_;
  metrics::RuntimeMetrics& metrics_;
  CheckpointManager checkpoints_;
  std::string newest_fetched_;
  std::set<std::string> unreadable_;
  std::set<std::string> stale_;
};

}  // namespace cifar::train
