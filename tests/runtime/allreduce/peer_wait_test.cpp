// A collective's wait (peer_wait.h) over a real Gloo group whose ranks are threads of this
// process: it ends as soon as a peer is said to be silent, long before the collective timeout.
#include "distributed/allreduce/peer_wait.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "distributed/allreduce/peer_lost.h"
#include "tests/runtime/allreduce/gloo_ranks.h"

namespace cifar::allreduce {
namespace {

using std::chrono::steady_clock;
using namespace std::chrono_literals;

TEST(PeerWait, EndsOnceAPeerIsSaidSilentNotAtTheTimeout) {
  std::string lost;
  steady_clock::duration waited{};
  cifar::testing::on_gloo_ranks(2, [&](int r, const cifar::testing::RankGroup& group) {
    std::vector<torch::Tensor> tensors{torch::ones({4})};
    if (r == 1) {  // late: rank 0 gives up on it first, then its all-reduce completes both
      std::this_thread::sleep_for(3s);
      group->allreduce(tensors)->wait();
      return;
    }
    const auto start = steady_clock::now();
    PeerWait wait{30s, [&] {
                    if (steady_clock::now() - start < 1s) return std::optional<std::string>();
                    return std::optional<std::string>("rank 1 of 2 has not beaten");
                  }};
    const auto work = group->allreduce(tensors);
    try {
      wait_for_peers(*group, work, wait, "test all-reduce");
    } catch (const PeerLost& e) {
      lost = e.what();
    }
    waited = steady_clock::now() - start;
    work->wait();  // rank 1's came: the group can go
  });
  EXPECT_NE(lost.find("test all-reduce failed (rank 0 of 2): rank 1 of 2 has not beaten"),
            std::string::npos)
      << lost;
  EXPECT_LT(waited, 3s) << "the wait should end at the silence, not at rank 1's all-reduce";
}

TEST(PeerWait, ACollectiveThatCompletesIsNotLostWhilePeersBeat) {
  cifar::testing::on_gloo_ranks(2, [&](int r, const cifar::testing::RankGroup& group) {
    std::vector<torch::Tensor> tensors{torch::full({4}, static_cast<double>(r + 1))};
    if (r == 1) std::this_thread::sleep_for(1200ms);  // past two of rank 0's slices
    PeerWait wait{30s, [] { return std::optional<std::string>(); }};
    EXPECT_NO_THROW(wait_for_peers(*group, group->allreduce(tensors), wait, "all-reduce"));
    EXPECT_TRUE(tensors[0].equal(torch::full({4}, 3.0)));
  });
}

}  // namespace
}  // namespace cifar::allreduce
