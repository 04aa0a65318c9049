// Synthetic CIFAR-10-format data: learnable without being trivial, for tests, demos and benchmarks
// on machines that cannot download the real thing.
#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <system_error>

#include "data/dataset.h"
#include "data/random.h"

namespace cifar::data {
namespace {

namespace fs = std::filesystem;

constexpr int kSide = 32;
constexpr int kChannels = 3;
constexpr int kPlane = kSide * kSide;
constexpr int kMaxShift = 3;
constexpr double kNoiseSigma = 18.0;
constexpr double kTwoPi = 6.283185307179586;
constexpr uint64_t kPrototypeTag = 0x70726f746f747970ULL;  // "prototyp"

// A class prototype: a base colour, a few periodic gratings (integer cycles per image, so shifted
// copies stay smooth) and one soft blob, which together make classes differ in colour, texture
// and layout.
using Prototype = std::array<float, static_cast<size_t>(kChannels) * kPlane>;

Prototype make_prototype(Rng& rng) {
  Prototype p{};
  std::array<double, kChannels> base{};
  for (auto& b : base) b = 100.0 + static_cast<double>(rng.below(57));
  struct Grating {
    int fx, fy;
    double phase;
    std::array<double, kChannels> amp;
  };
  std::array<Grating, 3> gratings{};
  for (auto& g : gratings) {
    do {
      g.fx = static_cast<int>(rng.below(7)) - 3;
      g.fy = static_cast<int>(rng.below(7)) - 3;
    } while (g.fx == 0 && g.fy == 0);
    g.phase = rng.uniform() * kTwoPi;
    for (auto& a : g.amp) a = (15.0 + rng.uniform() * 30.0) * (rng.below(2) != 0 ? 1 : -1);
  }
  const double cy = 8.0 + rng.uniform() * 16.0;
  const double cx = 8.0 + rng.uniform() * 16.0;
  const double radius = 3.0 + rng.uniform() * 3.0;
  std::array<double, kChannels> blob{};
  for (auto& a : blob) a = (30.0 + rng.uniform() * 40.0) * (rng.below(2) != 0 ? 1 : -1);

  for (int y = 0; y < kSide; ++y) {
    for (int x = 0; x < kSide; ++x) {
      const double r2 = ((y - cy) * (y - cy) + (x - cx) * (x - cx)) / (2 * radius * radius);
      const double bump = std::exp(-r2);
      for (int c = 0; c < kChannels; ++c) {
        double v = base[c] + blob[c] * bump;
        for (const auto& g : gratings) {
          v += g.amp[c] * std::sin(kTwoPi * (g.fx * x + g.fy * y) / kSide + g.phase);
        }
        p[static_cast<size_t>(c) * kPlane + static_cast<size_t>(y * kSide + x)] =
            static_cast<float>(v);
      }
    }
  }
  return p;
}

// Sample `index` of a split: a shifted (edge-clamped), contrast/brightness-jittered, noisy copy
// of its class prototype. Its own RNG stream makes it independent of generation order.
void make_sample(const std::vector<Prototype>& prototypes, uint64_t key, int32_t& label,
                 uint8_t* image) {
  Rng rng(key);
  label = static_cast<int32_t>(rng.below(prototypes.size()));
  const Prototype& p = prototypes[static_cast<size_t>(label)];
  const int dy = static_cast<int>(rng.below(2 * kMaxShift + 1)) - kMaxShift;
  const int dx = static_cast<int>(rng.below(2 * kMaxShift + 1)) - kMaxShift;
  // Contrast and per-channel colour casts blur the mean colour, so the texture and layout carry
  // most of the class signal.
  const double contrast = 0.7 + 0.6 * rng.uniform();
  std::array<double, kChannels> cast{};
  for (auto& v : cast) v = -25.0 + 50.0 * rng.uniform();
  // Irwin-Hall: the sum of four uniform bytes is close to Gaussian, and cheap.
  constexpr double kByteSumSigma = 147.80;  // sqrt(4 * (256^2 - 1) / 12)
  constexpr double kNoiseScale = kNoiseSigma / kByteSumSigma;
  uint64_t bits = 0;
  int bytes_left = 0;
  for (int c = 0; c < kChannels; ++c) {
    for (int y = 0; y < kSide; ++y) {
      const int sy = std::clamp(y + dy, 0, kSide - 1);
      for (int x = 0; x < kSide; ++x) {
        const int sx = std::clamp(x + dx, 0, kSide - 1);
        if (bytes_left < 4) {
          bits = rng();
          bytes_left = 8;
        }
        const double noise =
            static_cast<double>((bits & 0xFFU) + ((bits >> 8U) & 0xFFU) + ((bits >> 16U) & 0xFFU) +
                                ((bits >> 24U) & 0xFFU)) -
            510.0;
        bits >>= 32U;
        bytes_left -= 4;
        const double v =
            (p[static_cast<size_t>(c) * kPlane + static_cast<size_t>(sy * kSide + sx)] - 128.0) *
                contrast +
            128.0 + cast[c] + noise * kNoiseScale;
        image[c * kPlane + y * kSide + x] =
            static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
}

Dataset make_split(const std::vector<Prototype>& prototypes, uint64_t split_key, int64_t begin,
                   int64_t end) {
  Dataset d;
  d.name = "synthetic";
  d.num_classes = static_cast<int64_t>(prototypes.size());
  d.labels.resize(static_cast<size_t>(end - begin));
  d.images.resize(static_cast<size_t>((end - begin) * kChannels * kPlane));
  for (int64_t i = begin; i < end; ++i) {
    const auto k = static_cast<size_t>(i - begin);
    make_sample(prototypes, hash_combine(split_key, static_cast<uint64_t>(i)), d.labels[k],
                d.images.data() + k * kChannels * kPlane);
  }
  return d;
}

}  // namespace

void write_synthetic_cifar10(const fs::path& dir, const SyntheticOptions& options) {
  if (options.num_classes < 1 || options.num_classes > 10) {
    throw std::invalid_argument("write_synthetic_cifar10: num_classes " +
                                std::to_string(options.num_classes) + " outside [1, 10]");
  }
  // Five non-empty training files, as the CIFAR-10 reader expects.
  if (options.train_size < 5 || options.test_size < 1) {
    throw std::invalid_argument("write_synthetic_cifar10: need train_size >= 5 and test_size >= 1");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw DataError("cannot create " + dir.string() + ": " + ec.message());

  const uint64_t seed_key = mix64(options.seed);
  Rng proto_rng(hash_combine(seed_key, kPrototypeTag));
  std::vector<Prototype> prototypes;
  for (int64_t k = 0; k < options.num_classes; ++k) prototypes.push_back(make_prototype(proto_rng));

  const uint64_t train_key = hash_combine(seed_key, 1);
  for (int64_t f = 0; f < 5; ++f) {
    const int64_t begin = options.train_size * f / 5;
    const int64_t end = options.train_size * (f + 1) / 5;
    write_cifar10_file(dir / ("data_batch_" + std::to_string(f + 1) + ".bin"),
                       make_split(prototypes, train_key, begin, end));
  }
  write_cifar10_file(dir / "test_batch.bin",
                     make_split(prototypes, hash_combine(seed_key, 2), 0, options.test_size));
}

}  // namespace cifar::data
