// Fused crop / flip / normalise through per-channel lookup tables: no intermediate uint8 or
// padded copy, and one table load per output value instead of a subtract and a divide.
#include "data/augment.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "data/random.h"

namespace cifar::data {

Augmenter::Augmenter(int64_t channels, int64_t height, int64_t width, const AugmentOptions& options)
    : channels_(channels),
      height_(height),
      width_(width),
      padding_(static_cast<int>(options.crop_padding)),
      random_crop_(options.random_crop && options.crop_padding > 0),
      horizontal_flip_(options.horizontal_flip),
      lut_(static_cast<size_t>(channels * 256)) {
  if (channels <= 0 || height <= 0 || width <= 0) {
    throw std::invalid_argument("Augmenter: bad image shape " + std::to_string(channels) + "x" +
                                std::to_string(height) + "x" + std::to_string(width));
  }
  if (options.crop_padding < 0 || options.crop_padding > 1024) {
    throw std::invalid_argument("Augmenter: crop padding " + std::to_string(options.crop_padding) +
                                " outside [0, 1024]");
  }
  const auto& norm = options.normalize;
  const bool normalize = !norm.mean.empty() || !norm.stddev.empty();
  if (normalize && (static_cast<int64_t>(norm.mean.size()) != channels ||
                    static_cast<int64_t>(norm.stddev.size()) != channels)) {
    throw std::invalid_argument(
        "Augmenter: normalisation needs one mean and one stddev per channel (" +
        std::to_string(channels) + "), got " + std::to_string(norm.mean.size()) + " and " +
        std::to_string(norm.stddev.size()));
  }
  for (int64_t c = 0; c < channels; ++c) {
    const float mean = normalize ? norm.mean[static_cast<size_t>(c)] : 0.0F;
    const float stddev = normalize ? norm.stddev[static_cast<size_t>(c)] : 1.0F;
    if (!(stddev > 0.0F)) {
      throw std::invalid_argument("Augmenter: stddev of channel " + std::to_string(c) +
                                  " is not positive");
    }
    for (int v = 0; v < 256; ++v) {
      // Same operation order as torchvision's ToTensor + Normalize, so values match to the ulp.
      lut_[static_cast<size_t>(c * 256 + v)] = (static_cast<float>(v) / 255.0F - mean) / stddev;
    }
  }
}

CropFlip Augmenter::draw(uint64_t key) const {
  const uint64_t r = mix64(key);
  CropFlip p;
  if (random_crop_) {
    const auto span = 2 * static_cast<uint64_t>(padding_) + 1;
    // 21-bit fields: the modulo bias is below 1e-5 for any sane padding.
    p.dy = static_cast<int>((r & 0x1FFFFFU) % span) - padding_;
    p.dx = static_cast<int>(((r >> 21U) & 0x1FFFFFU) % span) - padding_;
  }
  if (horizontal_flip_) p.flip = ((r >> 63U) & 1U) != 0;
  return p;
}

void Augmenter::apply(const uint8_t* in, float* out, CropFlip params) const {
  const int64_t h = height_;
  const int64_t w = width_;
  // Output columns [x0, x1) read input columns x + dx; the rest are padding.
  const int64_t x0 = std::clamp<int64_t>(-params.dx, 0, w);
  const int64_t x1 = std::clamp<int64_t>(w - params.dx, x0, w);
  for (int64_t c = 0; c < channels_; ++c) {
    const float* lut = lut_.data() + c * 256;
    const float pad = lut[0];
    const uint8_t* plane = in + c * h * w;
    float* dst_plane = out + c * h * w;
    for (int64_t y = 0; y < h; ++y) {
      float* dst = dst_plane + y * w;
      const int64_t sy = y + params.dy;
      if (sy < 0 || sy >= h) {
        std::fill(dst, dst + w, pad);
        continue;
      }
      const uint8_t* row = plane + sy * w;
      const int64_t dx = params.dx;
      if (!params.flip) {
        std::fill(dst, dst + x0, pad);
        for (int64_t x = x0; x < x1; ++x) dst[x] = lut[row[x + dx]];
        std::fill(dst + x1, dst + w, pad);
      } else {
        // Flipped: output column w-1-x takes cropped column x.
        std::fill(dst + (w - x0), dst + w, pad);
        for (int64_t x = x0; x < x1; ++x) dst[w - 1 - x] = lut[row[x + dx]];
        std::fill(dst, dst + (w - x1), pad);
      }
    }
  }
}

}  // namespace cifar::data
