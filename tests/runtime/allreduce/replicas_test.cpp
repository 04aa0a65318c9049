// Keeping replicas equal: the coalesced broadcast, the digest, and the collective check over a
// real Gloo group whose ranks are threads of this process.
#include "distributed/allreduce/replicas.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "distributed/allreduce/process_group.h"
#include "tests/runtime/allreduce/gloo_ranks.h"

namespace cifar::allreduce {
namespace {

// Values from a generator of the caller's own: ranks are threads here, and torch's global
// generator would be shared (and raced) by them.
std::vector<torch::Tensor> random_tensors(uint64_t seed) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return {torch::randn({64, 3, 3}, generator), torch::randn({10}, generator),
          torch::randint(100, {3}, generator, torch::kInt64),
          torch::randn({2, 2}, generator, torch::kFloat64)};
}

std::vector<torch::Tensor> replica() { return random_tensors(3); }

void flip_lowest_bit(torch::Tensor& t, int64_t element) {
  auto* bytes = static_cast<unsigned char*>(t.data_ptr()) + element * t.element_size();
  bytes[0] ^= 1U;
}

TEST(BitwiseDigest, EqualForEqualBytesAndChangedByOneBitShapeOrDtype) {
  const auto a = replica();
  const auto b = replica();
  EXPECT_EQ(bitwise_digest(a), bitwise_digest(b));

  auto flipped = replica();
  flip_lowest_bit(flipped[0], 300);
  EXPECT_TRUE(torch::allclose(flipped[0], a[0]));         // numerically all but equal...
  EXPECT_NE(bitwise_digest(flipped), bitwise_digest(a));  // ...yet not the same replica

  auto reshaped = replica();
  reshaped[0] = reshaped[0].reshape({3, 64, 3});
  EXPECT_NE(bitwise_digest(reshaped), bitwise_digest(a));

  auto retyped = replica();
  retyped[2] = retyped[2].to(torch::kFloat64);  // the same values in other bytes
  EXPECT_NE(bitwise_digest(retyped), bitwise_digest(a));
  retyped[2] = retyped[2].to(torch::kInt64);
  EXPECT_EQ(bitwise_digest(retyped), bitwise_digest(a));

  // A non-contiguous view is digested by its values, as its contiguous copy.
  auto transposed = replica();
  transposed[0] = transposed[0].transpose(1, 2).contiguous().transpose(1, 2);
  EXPECT_EQ(bitwise_digest(transposed), bitwise_digest(a));
}

TEST(BroadcastCoalesced, EveryRankEndsWithRankZerosTensorsOfEveryDtype) {
  const int world = 3;
  std::vector<std::vector<torch::Tensor>> after(world);
  cifar::testing::on_gloo_ranks(world, [&](int r, const cifar::testing::RankGroup& group) {
    auto tensors = random_tensors(static_cast<uint64_t>(r));  // each rank its own values
    broadcast_coalesced(*group, tensors, PeerWait{std::chrono::seconds(30), {}});  // into `tensors`
    for (const auto& t : tensors) after[static_cast<size_t>(r)].push_back(t.clone());
  });
  const auto rank0 = random_tensors(0);
  for (const auto& tensors : after) {
    ASSERT_EQ(tensors.size(), rank0.size());
    for (size_t i = 0; i < rank0.size(); ++i) EXPECT_TRUE(tensors[i].equal(rank0[i])) << i;
  }
}

// `world` ranks each verify their replica; `odd_rank` (if >= 0) holds one flipped bit. Returns
// each rank's error message ("" when it passed).
std::vector<std::string> verify_on_ranks(int world, int odd_rank) {
  std::vector<std::string> errors(static_cast<size_t>(world));
  cifar::testing::on_gloo_ranks(world, [&](int r, const cifar::testing::RankGroup& group) {
    auto tensors = replica();
    if (r == odd_rank) flip_lowest_bit(tensors[1], 7);
    try {
      verify_replicas(*group, tensors, 7, PeerWait{std::chrono::seconds(30), {}});
    } catch (const std::runtime_error& e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
  });
  return errors;
}

TEST(VerifyReplicas, EqualReplicasPassOnEveryRank) {
  for (const auto& error : verify_on_ranks(3, -1)) EXPECT_EQ(error, "");
}

TEST(VerifyReplicas, OneFlippedBitOnOneRankFailsEveryRankNamingTheStep) {
  const auto errors = verify_on_ranks(3, 2);
  for (size_t r = 0; r < errors.size(); ++r) {
    EXPECT_NE(errors[r].find("replicas diverged after step 7: rank " + std::to_string(r) + " of 3"),
              std::string::npos)
        << errors[r];
  }
}

}  // namespace
}  // namespace cifar::allreduce
