#include "distributed/allreduce/trainer.h"

#include <torch/cuda.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "distributed/allreduce/exchange.h"
#include "distributed/allreduce/process_group.h"
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
  AllReduceExchange exchange(
      rank_config, make_process_group(ar, resolve_backend(ar.backend, config.device)), options);
  return train::run_training(rank_config, exchange);
}

}  // namespace cifar::allreduce
