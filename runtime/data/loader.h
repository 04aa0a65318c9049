// Batches of augmented, normalised float images, produced by worker threads ahead of use.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "data/dataset.h"

namespace cifar::data {

struct AugmentOptions {
  bool random_crop = true;  // pad by `crop_padding` (zeros) then crop back to the original size
  int64_t crop_padding = 4;
  bool horizontal_flip = true;  // with probability 0.5
  ChannelStats normalize;       // (x/255 - mean) / stddev per channel; empty = no normalisation
};

struct LoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  bool augment = true;     // false: normalisation only (evaluation)
  bool drop_last = false;  // the last partial batch is kept unless set
  AugmentOptions augmentation;
  uint64_t seed = 1;
  int num_workers = 2;  // augmentation threads
  int prefetch = 4;     // batches produced ahead of the consumer
  // Sharding: the epoch's permutation is read in global batches of `global_batch` positions (0:
  // batch_size x world_size; set, it alone sizes the batches and batch_size is unused), of which
  // this rank takes every world_size-th from `rank` on; a step's positions do not depend on the
  // world size, so that a job whose world changes between steps drops and repeats no sample
  // (docs/ARCHITECTURE.md, "Elastic jobs"). All ranks run the same number of batches; their sizes
  // differ by at most one when global_batch is not a multiple of world_size.
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t global_batch = 0;
};

// One batch, images N x C x H x W float32 (contiguous), labels int64.
struct Batch {
  int64_t index = 0;        // batch number within the epoch
  int64_t size = 0;         // this rank's samples
  int64_t global_size = 0;  // the step's samples over all ranks
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  std::vector<float> images;
  std::vector<int64_t> labels;
  std::vector<int64_t> samples;  // the dataset index of each (what the step trained, tallied)
};

// Deterministic under `seed`: the permutation depends only on (seed, epoch) and each sample's
// augmentation only on (seed, epoch, position in the epoch), so results do not depend on the
// number of workers or on thread timing, and an epoch can be resumed at any batch.
class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> data, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts (or restarts) producing the batches of `epoch`, from batch `first_batch` on.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // The next batch of the current epoch in order, or nullopt when the epoch is done.
  std::optional<Batch> next();

  [[nodiscard]] int64_t batches_per_epoch() const;
  [[nodiscard]] int64_t samples_per_epoch() const;  // this rank's share
  [[nodiscard]] const Dataset& dataset() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cifar::data
