#include "distributed/ps/parameter_server.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/ps/ps_checkpoint.h"
#include "distributed/ps/server.h"
#include "metrics/runtime_metrics.h"
#include "train/checkpoint.h"
#include "train/metrics_endpoint.h"

namespace cifar::ps {

void run_parameter_server(const train::TrainConfig& config) {
  const auto& dist = config.distributed;
  const auto& job = dist.job;
  const int servers = static_cast<int>(job.cluster.ps.size());
  // Each push is applied on a gRPC thread; a few intra-op threads per update is plenty.
  torch::set_num_threads(std::max(1, config.threads > 0 ? config.threads : 2));

  auto metrics = train::make_runtime_metrics(config);
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(dist.ps.timeout_seconds * 1000));
  // How many stripes the job uses follows from the model (layout.h), which only the trainers
  // build: the PS serves as many as a trainer may use, and uses those the master initialises.
  std::vector<std::shared_ptr<Shard>> stripes;
  for (int stripe = 0; stripe < kMaxStripes; ++stripe) {
    ShardOptions options;
    options.index = job.index;
    options.stripe = stripe;
    options.mode = dist.ps.mode;
    options.staleness = dist.ps.staleness;
    options.staleness_lr = dist.ps.staleness_lr;
    options.timeout = timeout;
    stripes.push_back(std::make_shared<Shard>(options, metrics.get()));
  }

  // A restarted PS takes its stripes from the newest checkpoint; a fresh one waits for the master.
  const train::CheckpointManager checkpoints(config.model_dir, train::run_name(config),
                                             config.keep_checkpoints);
  const auto restored = init_requests_from_checkpoints(
      checkpoints.list(), job.index, servers, config.distributed.ps.stripes, config.optimizer);
  for (size_t stripe = 0; stripe < restored.size(); ++stripe) {
    proto::InitReply reply;
    if (auto status = stripes[stripe]->initialize(restored[stripe], &reply); !status.ok()) {
      throw std::runtime_error("cannot restore stripe " + std::to_string(stripe) +
                               " from its checkpoint: " + status.message());
    }
  }

  const auto address = listen_address(job.cluster.ps.at(static_cast<size_t>(job.index)));
  ShardServer server(stripes, address, dist.ps.token, dist.ps.max_message_mb << 20);
  spdlog::info("ps {}: serving shard {} of {} on {} (mode {})", job.index, job.index, servers,
               address, mode_name(dist.ps.mode));
  // Stripe 0 is always used; by the time the master finishes it, every other stripe it uses has
  // been initialised (before training) and is finished too. Each stripe is waited for once.
  for (const auto& stripe : stripes) {
    if (stripe == stripes.front() || stripe->initialized()) stripe->wait_until_finished(timeout);
  }
  spdlog::info("ps {}: job finished at version {}", job.index, stripes.front()->version());
}

}  // namespace cifar::ps
