// Per-image augmentation (random crop with zero padding, horizontal flip) fused with per-channel
// normalisation: one pass from the uint8 image straight into the batch's float buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "data/loader.h"

namespace cifar::data {

// One sample's random choices. The output window is shifted by (dy, dx) against the image:
// before flipping, out(y, x) = in(y + dy, x + dx), zero outside; |dy|, |dx| <= crop padding.
// This is torchvision's RandomCrop(padding=p) with crop corner (p + dy, p + dx).
struct CropFlip {
  int dy = 0;
  int dx = 0;
  bool flip = false;  // mirror the output horizontally: out(y, x) <- out(y, W - 1 - x)
};

class Augmenter {
 public:
  // Throws std::invalid_argument on bad options (normalisation stats not one per channel,
  // non-positive stddev, negative padding).
  Augmenter(int64_t channels, int64_t height, int64_t width, const AugmentOptions& options);

  // The random choices for a sample, a pure function of `key` (e.g. a hash of seed, epoch and
  // position), honouring which augmentations are enabled.
  [[nodiscard]] CropFlip draw(uint64_t key) const;

  // Writes the channels x height x width floats of one image to `out`. Padding is zero in uint8
  // space, i.e. it normalises to (0 - mean) / stddev, as in torchvision.
  void apply(const uint8_t* in, float* out, CropFlip params) const;

  // The normalised value of byte `value` in `channel` (the lookup table apply() uses).
  [[nodiscard]] float normalized(int64_t channel, uint8_t value) const {
    return lut_[static_cast<size_t>(channel * 256 + value)];
  }

 private:
  int64_t channels_;
  int64_t height_;
  int64_t width_;
  int padding_;
  bool random_crop_;
  bool horizontal_flip_;
  std::vector<float> lut_;  // channels x 256: byte -> normalised float
};

}  // namespace cifar::data
