// Per-channel statistics for normalisation.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "data/dataset.h"

namespace cifar::data {

ChannelStats channel_stats(const Dataset& data) {
  if (data.size() == 0 || data.channels <= 0) {
    throw DataError("channel_stats: dataset '" + data.name + "' is empty");
  }
  if (static_cast<int64_t>(data.images.size()) != data.size() * data.image_bytes()) {
    throw DataError("channel_stats: dataset '" + data.name + "' has " +
                    std::to_string(data.images.size()) + " image bytes for " +
                    std::to_string(data.size()) + " images");
  }
  // A histogram per channel makes the sums exact (no float accumulation drift over 50k images).
  const int64_t plane = data.height * data.width;
  std::vector<std::array<uint64_t, 256>> hist(static_cast<size_t>(data.channels));
  for (auto& h : hist) h.fill(0);
  for (int64_t i = 0; i < data.size(); ++i) {
    const uint8_t* img = data.image(i);
    for (int64_t c = 0; c < data.channels; ++c) {
      auto& h = hist[static_cast<size_t>(c)];
      const uint8_t* p = img + c * plane;
      for (int64_t k = 0; k < plane; ++k) ++h[p[k]];
    }
  }
  ChannelStats stats;
  const auto n = static_cast<double>(data.size() * plane);
  for (const auto& h : hist) {
    double sum = 0;
    double sum_sq = 0;
    for (int v = 0; v < 256; ++v) {
      const double x = v / 255.0;
      sum += static_cast<double>(h[static_cast<size_t>(v)]) * x;
      sum_sq += static_cast<double>(h[static_cast<size_t>(v)]) * x * x;
    }
    const double mean = sum / n;
    const double var = std::max(0.0, sum_sq / n - mean * mean);
    stats.mean.push_back(static_cast<float>(mean));
    stats.stddev.push_back(static_cast<float>(std::sqrt(var)));
  }
  return stats;
}

}  // namespace cifar::data
