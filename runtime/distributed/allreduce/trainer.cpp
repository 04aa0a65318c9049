#include "distributed/allreduce/trainer.h"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <exception>
#include <optional>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "distributed/allreduce/exchange.h"
#include "distributed/allreduce/peer_lost.h"
#include "distributed/allreduce/process_group.h"
#include "distributed/allreduce/rendezvous.h"
#include "train/fence.h"
#include "train/graceful_stop.h"
#include "train/loop.h"

namespace cifar::allreduce {
namespace {

// Asked to stop while it waited for a group, with the state saved before the wait.
struct StoppedWhileWaiting : std::exception {};

}  // namespace

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
  // Set once the ranks stopped together with the state saved because another rank was asked to
  // stop (its pod drained or deleted): this rank waits for that rank's replacement, and a stop
  // asked of it meanwhile ends the wait with nothing lost.
  std::optional<train::TrainResult> saved_stop;
  while (true) {
    c10::intrusive_ptr<c10d::ProcessGroup> group;
    {
      std::optional<train::StopWindow> stoppable;
      if (saved_stop) stoppable.emplace();
      try {
        // A rank of an older incarnation (left on a cut-off node) stops instead of joining.
        group = rendezvous.form([&] {
          train::check_fence();
          if (saved_stop && train::stop_requested()) throw StoppedWhileWaiting();
        });
      } catch (const StoppedWhileWaiting&) {
        spdlog::info("rank {}: asked to stop while it waited; the state was saved at step {}",
                     ar.rank, saved_stop->steps);
        return *saved_stop;
      }
    }
    AllReduceExchange exchange(rank_config, std::move(group), options);
    try {
      // Every round starts from rank 0's newest checkpoint (AllReduceExchange::start).
      const auto result = train::run_training(rank_config, exchange);
      if (!result.stopped || train::stop_requested()) return result;
      spdlog::info(
          "rank {}: the ranks stopped after step {} with it saved; waiting up to {} s "
          "for the group to form again with the stopped rank's replacement",
          ar.rank, result.steps, ar.rendezvous_timeout_seconds);
      saved_stop = result;
    } catch (const PeerLost& e) {
      spdlog::warn("rank {}: {}; waiting up to {} s for the group to form again", ar.rank, e.what(),
                   ar.rendezvous_timeout_seconds);
      saved_stop.reset();
    }
    rendezvous.broken();
  }
}

}  // namespace cifar::allreduce
