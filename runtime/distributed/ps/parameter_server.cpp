#include "distributed/ps/parameter_server.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "contract/exit_codes.h"
#include "distributed/ps/job_tls.h"
#include "distributed/ps/ps_checkpoint.h"
#include "distributed/ps/server.h"
#include "metrics/runtime_metrics.h"
#include "train/checkpoint.h"
#include "train/cpu_cores.h"
#include "train/fence.h"
#include "train/graceful_stop.h"
#include "train/metrics_endpoint.h"
#include "train/run_store.h"

namespace cifar::ps {

namespace {

constexpr auto kPollPeriod = std::chrono::milliseconds(20);
constexpr auto kGatherReplyGrace = std::chrono::seconds(1);

// Whether the master finished the job (true) before this PS was asked to stop (false). Throws
// train::Replaced once a trainer's call said that a newer incarnation replaced this PS.
bool wait_for_finish_or_stop(const Shard& first, const ShardServer& server) {
  const train::StopWindow stop_window;
  while (!first.finished()) {
    if (train::stop_requested()) return false;
    if (const auto by = server.replaced_by()) {
      throw train::Replaced(*by, "a trainer expects it");
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
  return true;
}

// The shard's state is the job's: before this PS goes, the master's checkpoint must hold it. The
// replies say the PS is stopping, and the master gathers the state at its next step boundary
// (stopping too, or going on when only this PS is interrupted); kStopBound ends the wait. The
// master fetches each stripe it uses with its own call, so every initialised stripe must have been
// gathered at the version it had when the stop was noticed or later: leaving after the first would
// cut the master off from the others mid-save. A master signalled first may have gathered before
// this PS noticed its own stop; that gather counts.
void serve_until_state_gathered(ShardServer& server,
                                const std::vector<std::shared_ptr<Shard>>& stripes, int index) {
  std::vector<std::pair<const Shard*, int64_t>> stopped_at;
  for (const auto& stripe : stripes) {
    if (stripe->initialized()) stopped_at.emplace_back(stripe.get(), stripe->version());
  }
  const auto all_gathered = [&] {
    return std::all_of(stopped_at.begin(), stopped_at.end(),
                       [](const auto& s) { return s.first->gathered_version() >= s.second; });
  };
  const auto version = [&] { return stripes.front()->version(); };
  server.announce_stop();
  const auto waited = train::time_since_stop_request().value_or(std::chrono::seconds(0));
  const auto deadline = std::chrono::steady_clock::now() + (kStopBound - waited);
  spdlog::info("ps {}: asked to stop at version {}; serving until the master saves it", index,
               version());
  while (!all_gathered() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(kPollPeriod);
  }
  if (all_gathered()) {
    spdlog::info("ps {}: the master gathered the state at version {}; stopping", index, version());
    // A stripe counts as gathered when its GetState is served, before the reply has reached the
    // master: serving on a moment lets the last replies of the gather arrive (a cold CI run saw
    // the master's last GetState reset by the PS's exit, and its save never came).
    std::this_thread::sleep_for(kGatherReplyGrace);
  } else {
    spdlog::warn("ps {}: the master did not gather the state within {} s; stopping at version {}",
                 index, kStopBound.count(), version());
  }
}

}  // namespace

int run_parameter_server(const train::TrainConfig& config) {
  const auto& dist = config.distributed;
  const auto& job = dist.job;
  const int servers = static_cast<int>(job.cluster.ps.size());
  // Each push is applied on a gRPC thread; a few intra-op threads per update is plenty.
  torch::set_num_threads(config.threads > 0 ? config.threads
                                            : std::min(2, train::usable_cores().cores));

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

  // Created with its chief (both replaced: their node was lost or cut off), it claims the run for
  // their incarnation before it reads the checkpoints, so that the old chief, which may still be
  // training with the old PS, writes none after the one restored here (train/fence.h).
  if (config.incarnation > 0 && config.chief_incarnation == config.incarnation) {
    static_cast<void>(train::Fence::claim(config, train::FenceSlot::kChief));
  }
  // A restarted PS takes its stripes from the newest checkpoint; a fresh one waits for the master.
  const train::CheckpointManager checkpoints(train::open_run_store(config), train::run_name(config),
                                             config.keep_checkpoints);
  const auto restored = init_requests_from_checkpoints(
      checkpoints, job.index, servers, config.distributed.ps.stripes, config.optimizer);
  for (size_t stripe = 0; stripe < restored.size(); ++stripe) {
    proto::InitReply reply;
    if (auto status = stripes[stripe]->initialize(restored[stripe], &reply); !status.ok()) {
      throw std::runtime_error("cannot restore stripe " + std::to_string(stripe) +
                               " from its checkpoint: " + status.message());
    }
  }

  const auto address = listen_address(job.cluster.ps.at(static_cast<size_t>(job.index)));
  DoorOptions door{dist.ps.token, job_credentials(dist.ps, ChannelEnd::kServes),
                   [&metrics](Refusal refusal) {
                     if (metrics) metrics->record_ps_refusal(refusal_name(refusal));
                   }};
  const std::string channel = door.tls ? "mutual TLS with the job's certificate \"" +
                                             security::common_name_of(door.tls->certificate) + "\""
                                       : "plaintext";
  ShardServer server(stripes, address, std::move(door), dist.ps.max_message_mb << 20,
                     config.incarnation);
  spdlog::info("ps {}: serving shard {} of {} on {} (mode {}, {})", job.index, job.index, servers,
               address, mode_name(dist.ps.mode), channel);
  // Stripe 0 is always used; by the time the master finishes it, every other stripe it uses has
  // been initialised (before training) and is finished too. Each stripe is waited for once.
  auto& first = *stripes.front();
  if (!wait_for_finish_or_stop(first, server)) {
    serve_until_state_gathered(server, stripes, job.index);
    return contract::kExitStopped;
  }
  for (const auto& stripe : stripes) {
    if (stripe == stripes.front() || stripe->initialized()) stripe->wait_until_finished(timeout);
  }
  spdlog::info("ps {}: job finished at version {}", job.index, stripes.front()->version());
  return contract::kExitOk;
}

}  // namespace cifar::ps
