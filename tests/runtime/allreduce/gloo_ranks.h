// Test scaffold of the all-reduce unit tests: the ranks of one real Gloo group as threads of this
// process, each with its own TCPStore client and Gloo context over loopback, met as pods meet
// (rendezvous.h).
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "distributed/allreduce/rendezvous.h"
#include "tests/support/process.h"

namespace cifar::testing {

using RankGroup = c10::intrusive_ptr<c10d::ProcessGroup>;

// Runs `body(rank, group)` on `world` ranks of one Gloo group and returns once every rank has.
template <typename Body>
void on_gloo_ranks(int world, Body body) {
  allreduce::Options options;
  options.world_size = world;
  options.master_port = free_port();
  options.timeout_seconds = 30;
  std::vector<std::thread> ranks;
  ranks.reserve(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      auto rank_options = options;
      rank_options.rank = r;
      allreduce::Rendezvous rendezvous(rank_options, allreduce::Backend::kGloo);
      const RankGroup group = rendezvous.form([] {});
      body(r, group);
    });
  }
  for (auto& t : ranks) t.join();
}

}  // namespace cifar::testing
