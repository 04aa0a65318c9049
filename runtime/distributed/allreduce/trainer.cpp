#include "distributed/allreduce/trainer.h"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "distributed/allreduce/exchange.h"
#include "distributed/allreduce/peer_lost.h"
#include "distributed/allreduce/process_group.h"
#include "distributed/allreduce/rendezvous.h"
#include "train/fence.h"
#include "train/loop.h"

namespace cifar::allreduce {

train::TrainResult run_allreduce_trainer(const train::TrainConfig& config) {
  const auto& ar = config.distributed.allreduce;
  BucketOptions options;
  options.cap_bytes = static_cast<int64_t>(ar.bucket_cap_mb * (1 << 20));
  options.first_cap_bytes = static_cast<int64_t>(ar.first_bucket_mb * (1 << 20));
  options.overlap = ar.overlap;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(ar.timeout_seconds * 1000));
  auto rank_config = config;
  if (config.device == "cuda") {
    // Each local rank trains on its own GPU (more ranks than GPUs share them round-robin).
    const auto gpus = static_cast<int>(torch::cuda::device_count());
    rank_config.device = "cuda:" + std::to_string(gpus > 0 ? ar.local_rank % gpus : 0);
  }
  Rendezvous rendezvous(ar, resolve_backend(ar.backend, config.device));
  while (true) {
    // A rank of an older incarnation (left on a cut-off node) stops instead of joining.
    AllReduceExchange exchange(rank_config, rendezvous.form(train::check_fence), options);
    try {
      // Every round starts from rank 0's newest checkpoint (AllReduceExchange::start).
      return train::run_training(rank_config, exchange);
    } catch (const PeerLost& e) {
      spdlog::warn("rank {}: {}; waiting up to {} s for the group to form again", ar.rank, e.what(),
                   ar.rendezvous_timeout_seconds);
      rendezvous.broken();
    }
  }
}

}  // namespace cifar::allreduce
