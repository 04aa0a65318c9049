// Crop, flip and normalisation, each checked against its definition on every pixel.
#include "data/augment.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "data/random.h"
#include "tests/runtime/data/test_util.h"

namespace cifar::data {
namespace {

using testing::make_dataset;

AugmentOptions with_stats(std::vector<float> mean, std::vector<float> stddev) {
  AugmentOptions o;
  o.normalize.mean = std::move(mean);
  o.normalize.stddev = std::move(stddev);
  return o;
}

const AugmentOptions kCifarNorm = with_stats({0.49F, 0.48F, 0.45F}, {0.25F, 0.24F, 0.26F});

// The reference: torchvision's order of operations on one value.
float reference(uint8_t v, float mean, float stddev) {
  return (static_cast<float>(v) / 255.0F - mean) / stddev;
}

TEST(Augment, NormalisationOnlyIsExact) {
  const Dataset d = make_dataset(1);
  const Augmenter aug(3, 32, 32, kCifarNorm);
  std::vector<float> out(3072);
  aug.apply(d.image(0), out.data(), {});
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t k = 0; k < 1024; ++k) {
      const auto i = static_cast<size_t>(c * 1024 + k);
      ASSERT_EQ(out[i], reference(d.images[i], kCifarNorm.normalize.mean[static_cast<size_t>(c)],
                                  kCifarNorm.normalize.stddev[static_cast<size_t>(c)]));
    }
  }
  EXPECT_EQ(aug.normalized(1, 255), reference(255, 0.48F, 0.24F));
}

TEST(Augment, NoStatsMeansScaleToUnitInterval) {
  const Augmenter aug(1, 4, 4, AugmentOptions{});
  EXPECT_EQ(aug.normalized(0, 0), 0.0F);
  EXPECT_EQ(aug.normalized(0, 255), 1.0F);
  EXPECT_EQ(aug.normalized(0, 51), 0.2F);
}

// Every shift in [-4, 4]^2: content moves, the rest is padding (normalised zero).
TEST(Augment, CropShiftsContentAndZeroFills) {
  const Dataset d = make_dataset(1);
  const Augmenter aug(3, 32, 32, kCifarNorm);
  std::vector<float> out(3072);
  for (int dy = -4; dy <= 4; ++dy) {
    for (int dx = -4; dx <= 4; ++dx) {
      aug.apply(d.image(0), out.data(), {dy, dx, false});
      for (int64_t c = 0; c < 3; ++c) {
        for (int64_t y = 0; y < 32; ++y) {
          for (int64_t x = 0; x < 32; ++x) {
            const int64_t sy = y + dy;
            const int64_t sx = x + dx;
            const bool inside = sy >= 0 && sy < 32 && sx >= 0 && sx < 32;
            const uint8_t v = inside ? d.image(0)[c * 1024 + sy * 32 + sx] : 0;
            ASSERT_EQ(out[static_cast<size_t>(c * 1024 + y * 32 + x)], aug.normalized(c, v))
                << dy << "," << dx << " c" << c << " y" << y << " x" << x;
          }
        }
      }
    }
  }
}

TEST(Augment, FlipMirrorsTheCrop) {
  const Dataset d = make_dataset(1, 2, 5, 7);  // odd, non-square: catches off-by-ones
  const Augmenter aug(2, 5, 7, with_stats({0.5F, 0.1F}, {0.2F, 0.3F}));
  std::vector<float> plain(70);
  std::vector<float> flipped(70);
  for (int dy = -2; dy <= 2; ++dy) {
    for (int dx = -3; dx <= 3; ++dx) {
      aug.apply(d.image(0), plain.data(), {dy, dx, false});
      aug.apply(d.image(0), flipped.data(), {dy, dx, true});
      for (int64_t c = 0; c < 2; ++c) {
        for (int64_t y = 0; y < 5; ++y) {
          for (int64_t x = 0; x < 7; ++x) {
            ASSERT_EQ(flipped[static_cast<size_t>(c * 35 + y * 7 + x)],
                      plain[static_cast<size_t>(c * 35 + y * 7 + (6 - x))]);
          }
        }
      }
    }
  }
}

TEST(Augment, ShiftBeyondTheImageIsAllPadding) {
  const Dataset d = make_dataset(1, 1, 4, 4);
  AugmentOptions o;
  o.crop_padding = 8;
  const Augmenter aug(1, 4, 4, o);
  std::vector<float> out(16, -1.0F);
  aug.apply(d.image(0), out.data(), {0, 6, true});
  for (float v : out) EXPECT_EQ(v, 0.0F);
  aug.apply(d.image(0), out.data(), {-5, 0, false});
  for (float v : out) EXPECT_EQ(v, 0.0F);
}

TEST(Augment, DrawCoversTheRangeAndIsAPureFunctionOfTheKey) {
  const Augmenter aug(3, 32, 32, kCifarNorm);
  std::set<std::tuple<int, int, bool>> seen;
  int flips = 0;
  constexpr int kDraws = 20000;
  for (uint64_t key = 0; key < kDraws; ++key) {
    const CropFlip p = aug.draw(mix64(key));
    ASSERT_GE(p.dy, -4);
    ASSERT_LE(p.dy, 4);
    ASSERT_GE(p.dx, -4);
    ASSERT_LE(p.dx, 4);
    seen.emplace(p.dy, p.dx, p.flip);
    flips += p.flip ? 1 : 0;
    const CropFlip again = aug.draw(mix64(key));
    ASSERT_EQ(std::make_tuple(p.dy, p.dx, p.flip), std::make_tuple(again.dy, again.dx, again.flip));
  }
  EXPECT_EQ(seen.size(), 9U * 9U * 2U);
  EXPECT_NEAR(flips, kDraws / 2.0, kDraws / 20.0);
}

TEST(Augment, DisabledAugmentationsNeverDraw) {
  AugmentOptions o;
  o.random_crop = false;
  o.horizontal_flip = false;
  const Augmenter none(3, 32, 32, o);
  AugmentOptions zero_pad;
  zero_pad.crop_padding = 0;
  const Augmenter flip_only(3, 32, 32, zero_pad);
  bool any_flip = false;
  for (uint64_t key = 0; key < 100; ++key) {
    const CropFlip p = none.draw(key);
    EXPECT_EQ(p.dy, 0);
    EXPECT_EQ(p.dx, 0);
    EXPECT_FALSE(p.flip);
    const CropFlip f = flip_only.draw(key);
    EXPECT_EQ(f.dy, 0);
    EXPECT_EQ(f.dx, 0);
    any_flip |= f.flip;
  }
  EXPECT_TRUE(any_flip);
}

TEST(Augment, RejectsBadOptions) {
  EXPECT_THROW(Augmenter(3, 32, 32, with_stats({0.5F}, {0.5F})), std::invalid_argument);
  EXPECT_THROW(Augmenter(3, 32, 32, with_stats({0.5F, 0.5F, 0.5F}, {0.5F, 0.0F, 0.5F})),
               std::invalid_argument);
  AugmentOptions o;
  o.crop_padding = -1;
  EXPECT_THROW(Augmenter(3, 32, 32, o), std::invalid_argument);
  EXPECT_THROW(Augmenter(0, 32, 32, AugmentOptions{}), std::invalid_argument);
}

}  // namespace
}  // namespace cifar::data
