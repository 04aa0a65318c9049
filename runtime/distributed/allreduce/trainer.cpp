#include "distributed/allreduce/trainer.h"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "distributed/allreduce/exchange.h"
#include "distributed/allreduce/peer_lost.h"
#include "distributed/allreduce/process_group.h"
#include "distributed/allreduce/rendezvous.h"
#include "health/heartbeat.h"
#include "train/fence.h"
#include "train/graceful_stop.h"
#include "train/loop.h"

namespace cifar::allreduce {
namespace {

// Asked to stop while it waited for a group, with the state saved before the wait.
struct StoppedWhileWaiting : std::exception {};

// The fence this rank writes the run under in the round of `group`: a fixed job's chief holds the
// one main claimed; an elastic job's chief is the group's rank 0, which claims the chief's slot
// with the round's generation (train/fence.h), and its other ranks write nothing.
train::Fence chief_fence_of_round(const train::TrainConfig& config, const train::Fence& fence,
                                  const Rendezvous& rendezvous, c10d::ProcessGroup& group) {
  if (!config.distributed.elastic()) return fence;
  if (group.getRank() != 0) return {};
  auto claimed = train::Fence::claim(config, train::FenceSlot::kChief, rendezvous.generation());
  if (claimed.incarnation() > 0) {
    spdlog::info("{}: rank 0 of round {}, the chief: holds the run's fence as generation {}",
                 config.distributed.who(), rendezvous.round(), claimed.incarnation());
  }
  return claimed;
}

// What a rank that leaves without training further reports: stopped, at the step it holds.
train::TrainResult stopped_holding(const std::optional<HeldState>& held) {
  train::TrainResult left;
  left.stopped = true;
  if (held) {
    left.steps = held->step;
    left.epochs_completed = held->epochs_completed;
  }
  return left;
}

}  // namespace

train::TrainResult run_allreduce_trainer(const train::TrainConfig& config,
                                         const train::Fence& fence) {
  const auto& ar = config.distributed.allreduce;
  const auto who = config.distributed.who();
  BucketOptions options;
  options.cap_bytes = static_cast<int64_t>(ar.bucket_cap_mb * (1 << 20));
  options.first_cap_bytes = static_cast<int64_t>(ar.first_bucket_mb * (1 << 20));
  options.overlap = ar.overlap;
  options.wait.timeout = std::chrono::milliseconds(static_cast<int64_t>(ar.timeout_seconds * 1000));
  auto rank_config = config;
  if (config.device == "cuda") {
    // Each local rank trains on its own GPU (more ranks than GPUs share them round-robin).
    const auto gpus = static_cast<int>(torch::cuda::device_count());
    rank_config.device = "cuda:" + std::to_string(gpus > 0 ? ar.local_rank % gpus : 0);
  }
  // The run's stop window (train/graceful_stop.h), which the loop opens from its first step and
  // leaves open: a stop asked after a round (while it closes, or while this rank waits for a
  // stopped rank's replacement) is a request, not an exit that says nothing. A fixed job's is
  // closed once the next group formed, so that the round's start is outside a window as a
  // starting process's is, and when a peer is lost (nothing since the newest checkpoint is
  // saved). An elastic rank's is open from the start: asked to stop while it waits for a group, it
  // leaves the rendezvous (rendezvous.h), and the others form without it at once. Declared before
  // the rendezvous so that it closes after the group and the c10d store are.
  const bool elastic = config.distributed.elastic();
  std::optional<train::StopWindow> stop_window;
  const auto close_window_unless_elastic = [&] {
    if (!elastic) stop_window.reset();
  };
  if (elastic) stop_window.emplace();
  Rendezvous rendezvous(ar, resolve_backend(ar.backend, config.device));
  // An elastic job's ranks go on without a peer that stopped beating at the store (frozen, cut
  // off) as soon as they see it, not at the collective timeout.
  if (ar.min_world_size > 0)
    options.wait.silent_peer = [&rendezvous] { return rendezvous.silent_peer(); };
  // Set once the ranks stopped together with the state saved because another rank was asked to
  // stop (its pod drained or deleted): this rank waits for that rank's replacement, and a stop
  // asked of it meanwhile ends the wait with nothing lost.
  std::optional<train::TrainResult> saved_stop;
  // What this rank trained, kept from a group that broke for the next (AllReduceExchange).
  std::optional<HeldState> held;
  while (true) {
    c10::intrusive_ptr<c10d::ProcessGroup> group;
    try {
      // A rank of an older incarnation (left on a cut-off node) stops instead of joining.
      const health::ExpectedQuiet quiet("waiting for the group to form");
      group = rendezvous.form(
          [&] {
            fence.check();
            if (!elastic && saved_stop && train::stop_requested()) throw StoppedWhileWaiting();
          },
          elastic ? std::function<bool()>(train::stop_requested) : nullptr);
    } catch (const StoppedWhileWaiting&) {
      spdlog::info("{}: asked to stop while it waited; the state was saved at step {}", who,
                   saved_stop->steps);
      return *saved_stop;
    } catch (const LeftTheRendezvous& e) {
      const auto left = saved_stop ? *saved_stop : stopped_holding(held);
      spdlog::info("{}: asked to stop while it waited for a group: {}, after step {}", who,
                   e.what(), left.steps);
      return left;
    }
    close_window_unless_elastic();
    std::function<bool()> must_reform;
    if (ar.min_world_size > 0) must_reform = [&rendezvous] { return rendezvous.must_reform(); };
    const auto round_fence = chief_fence_of_round(config, fence, rendezvous, *group);
    AllReduceExchange exchange(rank_config, std::move(group), rendezvous.round(), options,
                               round_fence, std::move(held), std::move(must_reform));
    try {
      // Every round starts from the newest state a rank holds, or else rank 0's newest checkpoint
      // (AllReduceExchange::start).
      const auto result = train::run_training(rank_config, exchange, round_fence, stop_window);
      if (!result.stopped || train::stop_requested()) return result;
      held = exchange.held_state();
      if (elastic) {
        spdlog::info(
            "{}: a rank left after step {}; the group forms again with the ranks there are", who,
            result.steps);
      } else {
        spdlog::info(
            "{}: the ranks stopped after step {} with it saved; waiting up to {} s "
            "for the group to form again with the stopped rank's replacement",
            who, result.steps, ar.rendezvous_timeout_seconds);
      }
      saved_stop = result;
    } catch (const ReformGroup& e) {
      close_window_unless_elastic();
      held = exchange.held_state();
      if (train::stop_requested()) {
        // Asked to stop as the group forms again (a scale-down): it leaves, and the ranks left
        // hold the state without it.
        const auto left = stopped_holding(held);
        spdlog::info("{}: asked to stop as its group forms again: leaving it after step {}", who,
                     left.steps);
        return left;
      }
      spdlog::info("{}: {}", who, e.what());
      saved_stop.reset();
    } catch (const train::RunTakenOver&) {
      throw;
    } catch (const train::Replaced& e) {
      // An elastic job's rank 0 whose group went on without it (it was frozen, or cut off from
      // its peers): a newer round's rank 0 holds the run. Its pod is still one of the job's: it
      // joins the next round, as any rank that came late, and is handed the group's state.
      if (!elastic) throw;
      spdlog::warn(
          "{}: no longer the chief ({}): its group went on without it; it writes nothing "
          "more and joins the next round",
          who, e.what());
      held.reset();  // older than what the group holds now
      saved_stop.reset();
    } catch (const PeerLost& e) {
      close_window_unless_elastic();
      if (train::stop_requested()) {  // no group to wait for: the pod is going
        spdlog::warn(
            "{}: asked to stop, and a peer was lost first: what was trained since "
            "the newest checkpoint is not saved",
            who);
        throw;
      }
      held = exchange.held_state();
      spdlog::warn("{}: {}; waiting up to {} s for the group to form again{}", who, e.what(),
                   ar.rendezvous_timeout_seconds,
                   held ? ", holding the state of every step it completed" : "");
      saved_stop.reset();
    }
    rendezvous.broken();
  }
}

}  // namespace cifar::allreduce
