// Bucket assignment (pure), and the bucketed all-reduce over a real Gloo group whose ranks are
// threads of this process (gloo_ranks.h).
#include "distributed/allreduce/gradient_buckets.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "distributed/allreduce/process_group.h"
#include "tests/runtime/allreduce/gloo_ranks.h"

namespace cifar::allreduce {
namespace {

TEST(AssignBuckets, ReverseOrderSmallFirstBucketCapsAndOversizedAlone) {
  // Parameters 0..4 of 4, 4, 10, 2, 2 bytes; first cap 4, cap 8.
  const auto buckets = assign_buckets({4, 4, 10, 2, 2}, 4, 8);
  const std::vector<std::vector<size_t>> expected = {{4, 3}, {2}, {1, 0}};
  EXPECT_EQ(buckets, expected);
}

TEST(AssignBuckets, EveryParameterExactlyOnce) {
  std::vector<int64_t> bytes;
  bytes.reserve(40);
  for (int i = 0; i < 40; ++i) bytes.push_back((i * 7919) % 1000 + 1);
  const auto buckets = assign_buckets(bytes, 500, 3000);
  std::vector<int> seen(bytes.size(), 0);
  for (const auto& b : buckets) {
    for (const auto p : b) ++seen[p];
  }
  for (const auto s : seen) EXPECT_EQ(s, 1);
}

// `world` ranks as threads train the same tiny linear model on different inputs; after backward
// every rank's gradient must be the mean of the ranks' own gradients, overlap or not.
void expect_mean_gradients(int world, bool overlap) {
  std::vector<std::vector<torch::Tensor>> grads(static_cast<size_t>(world));
  std::vector<std::vector<torch::Tensor>> local(static_cast<size_t>(world));
  cifar::testing::on_gloo_ranks(world, [&](int r, const cifar::testing::RankGroup& group) {
    torch::manual_seed(0);
    auto w1 = torch::randn({300, 20}, torch::requires_grad());
    auto w2 = torch::randn({20, 3}, torch::requires_grad());
    BucketOptions bucket_options;
    bucket_options.cap_bytes = 8000;  // w1 (24 KB) alone, w2 in the small first bucket
    bucket_options.first_cap_bytes = 1000;
    bucket_options.overlap = overlap;
    GradientBuckets buckets({w1, w2}, group, bucket_options, nullptr);
    EXPECT_EQ(buckets.bucket_count(), 2U);
    auto x = torch::full({5, 300}, static_cast<double>(r + 1));
    auto loss = x.mm(w1).tanh().mm(w2).sum();
    auto own = torch::autograd::grad({loss}, {w1, w2}, {}, /*retain_graph=*/true);
    local[static_cast<size_t>(r)] = {own[0], own[1]};
    buckets.begin_backward();
    loss.backward();
    buckets.end_backward();
    grads[static_cast<size_t>(r)] = {w1.grad().clone(), w2.grad().clone()};
  });
  for (size_t k = 0; k < 2; ++k) {
    auto mean = torch::zeros_like(local[0][k]);
    for (int r = 0; r < world; ++r) mean += local[static_cast<size_t>(r)][k];
    mean /= world;
    for (int r = 0; r < world; ++r) {
      EXPECT_TRUE(torch::allclose(grads[static_cast<size_t>(r)][k], mean, 1e-5, 1e-6));
      // Bit-identical on every rank: all hold the one result of the same all-reduce.
      EXPECT_TRUE(grads[static_cast<size_t>(r)][k].equal(grads[0][k]));
    }
  }
}

TEST(GradientBuckets, TwoRanksGetTheMeanGradientWithOverlap) { expect_mean_gradients(2, true); }
TEST(GradientBuckets, ThreeRanksGetTheMeanGradientWithoutOverlap) {
  expect_mean_gradients(3, false);
}

}  // namespace
}  // namespace cifar::allreduce
