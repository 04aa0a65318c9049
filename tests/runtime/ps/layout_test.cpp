// The shard layout: every element owned exactly once, balanced by bytes, big tensors split.
#include "distributed/ps/layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace cifar::ps {
namespace {

// alexnet's trainable parameters at 32x32 (models/alexnet.cpp): one dominant fc1 weight.
std::vector<ParameterInfo> alexnet_like() {
  return {{"conv1.weight", 4800},  {"conv1.bias", 64}, {"conv2.weight", 102400}, {"conv2.bias", 64},
          {"fc1.weight", 1572864}, {"fc1.bias", 384},  {"fc2.weight", 73728},    {"fc2.bias", 192},
          {"fc3.weight", 1920},    {"fc3.bias", 10}};
}

void expect_exact_cover(const ShardLayout& layout) {
  for (size_t p = 0; p < layout.parameters().size(); ++p) {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (int s = 0; s < layout.shards(); ++s) {
      for (const auto& piece : layout.pieces(s)) {
        if (piece.parameter == static_cast<int>(p)) ranges.emplace_back(piece.offset, piece.length);
      }
    }
    std::sort(ranges.begin(), ranges.end());
    int64_t next = 0;
    for (const auto& [offset, length] : ranges) {
      EXPECT_EQ(offset, next) << layout.parameters()[p].name;
      EXPECT_GT(length, 0);
      next = offset + length;
    }
    EXPECT_EQ(next, layout.parameters()[p].numel) << layout.parameters()[p].name;
  }
}

TEST(ShardLayout, OneShardHoldsEveryParameterWhole) {
  const ShardLayout layout(alexnet_like(), 1);
  ASSERT_EQ(layout.pieces(0).size(), alexnet_like().size());
  for (uint32_t k = 0; k < layout.pieces(0).size(); ++k) {
    EXPECT_EQ(layout.pieces(0)[k].key, k);
    EXPECT_EQ(layout.pieces(0)[k].offset, 0);
  }
  expect_exact_cover(layout);
}

TEST(ShardLayout, SplitsTheDominantTensorSoNoShardIsAHotSpot) {
  for (const int shards : {2, 3, 4, 7}) {
    const ShardLayout layout(alexnet_like(), shards);
    expect_exact_cover(layout);
    int64_t heaviest = 0;
    int64_t lightest = INT64_MAX;
    for (int s = 0; s < shards; ++s) {
      heaviest = std::max(heaviest, layout.elements(s));
      lightest = std::min(lightest, layout.elements(s));
    }
    // Without splitting one shard would hold fc1 alone: 89% of all bytes.
    EXPECT_LE(heaviest - lightest, 1) << shards << " shards";
  }
}

TEST(ShardLayout, SmallTensorsStayWhole) {
  const ShardLayout layout(alexnet_like(), 4);
  int64_t pieces = 0;
  for (int s = 0; s < 4; ++s) pieces += static_cast<int64_t>(layout.pieces(s).size());
  // Each cut splits at most one tensor in two.
  EXPECT_LE(pieces, static_cast<int64_t>(alexnet_like().size()) + 3);
}

TEST(ShardLayout, KeysFollowParameterOrderWithinEachShard) {
  const ShardLayout layout(alexnet_like(), 3);
  for (int s = 0; s < 3; ++s) {
    const auto& pieces = layout.pieces(s);
    for (size_t k = 0; k < pieces.size(); ++k) {
      EXPECT_EQ(pieces[k].key, k);
      EXPECT_EQ(pieces[k].shard, s);
      if (k > 0) {
        EXPECT_TRUE(pieces[k - 1].parameter < pieces[k].parameter ||
                    pieces[k - 1].offset < pieces[k].offset);
      }
    }
  }
}

TEST(ShardLayout, FingerprintIdentifiesNamesSizesAndShardCount) {
  const auto params = alexnet_like();
  EXPECT_EQ(ShardLayout(params, 2).fingerprint(), ShardLayout(params, 2).fingerprint());
  EXPECT_NE(ShardLayout(params, 2).fingerprint(), ShardLayout(params, 3).fingerprint());
  auto renamed = params;
  renamed[0].name = "conv0.weight";
  EXPECT_NE(ShardLayout(params, 2).fingerprint(), ShardLayout(renamed, 2).fingerprint());
  auto resized = params;
  resized.back().numel = 100;
  EXPECT_NE(ShardLayout(params, 2).fingerprint(), ShardLayout(resized, 2).fingerprint());
}

TEST(ShardLayout, StripesGrowWithEachServersShareUpToTheCap) {
  const int64_t floats_per_stripe = kStripeBytes / 4;
  EXPECT_EQ(stripes_per_server({{"w", 100}}, 1), 1);
  EXPECT_EQ(stripes_per_server({{"w", 2 * floats_per_stripe - 1}}, 1), 1);
  EXPECT_EQ(stripes_per_server({{"w", 2 * floats_per_stripe}}, 1), 2);
  EXPECT_EQ(stripes_per_server({{"w", 3 * floats_per_stripe}}, 1), 3);
  EXPECT_EQ(stripes_per_server({{"w", 100 * floats_per_stripe}}, 1), kMaxStripes);
  EXPECT_EQ(stripes_per_server({{"w", 100 * floats_per_stripe}}, 25), kMaxStripes);
  EXPECT_EQ(stripes_per_server({{"w", 100 * floats_per_stripe}}, 50), 2);
  // alexnet's 7.0 MB: the cap on one server or two, three stripes each of eight.
  EXPECT_EQ(stripes_per_server(alexnet_like(), 1), kMaxStripes);
  EXPECT_EQ(stripes_per_server(alexnet_like(), 2), kMaxStripes);
  EXPECT_EQ(stripes_per_server(alexnet_like(), 8), 3);
  EXPECT_THROW(stripes_per_server(alexnet_like(), 0), std::invalid_argument);
}

TEST(ShardLayout, RequestedStripesOverrideTheSizeRuleWithinItsBounds) {
  EXPECT_EQ(stripes_per_server({{"w", 100}}, 1, 3), 3);
  EXPECT_EQ(stripes_per_server(alexnet_like(), 1, 1), 1);
  EXPECT_EQ(stripes_per_server(alexnet_like(), 8, 0), stripes_per_server(alexnet_like(), 8));
  EXPECT_THROW(stripes_per_server(alexnet_like(), 1, kMaxStripes + 1), std::invalid_argument);
  EXPECT_THROW(stripes_per_server(alexnet_like(), 1, -1), std::invalid_argument);
}

TEST(ShardLayout, RejectsNoShardsAndEmptyParameters) {
  EXPECT_THROW(ShardLayout(alexnet_like(), 0), std::invalid_argument);
  EXPECT_THROW(ShardLayout({{"w", 0}}, 1), std::invalid_argument);
}

}  // namespace
}  // namespace cifar::ps
