// The state every mode of a shard shares, guarded by `mu`: the parameters and their optimizer,
// the version, the job's members and what each has been told. Shard (shard.h) owns one and
// serves the calls every mode answers alike; its mode (shard_mode.h) handles pushes.
#pragma once

#include <torch/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/ps_options.h"
#include "distributed/ps/shard_messages.h"
#include "distributed/ps/shard_optimizer.h"

namespace cifar::metrics {
class RuntimeMetrics;
}

namespace cifar::ps {

struct ShardOptions {
  int index = 0;   // the PS's index in the job
  int stripe = 0;  // of that PS (layout.h); stripe 0 reports the PS's version, members, updates

  Mode mode = Mode::kSync;
  int64_t staleness = 3;
  bool staleness_lr = false;
  std::chrono::milliseconds timeout{30000};
};

struct ShardCore {
  using Lock = std::unique_lock<std::mutex>;
  using Clock = std::chrono::steady_clock;

  // `lock_free`: the mode serves pushes without `mu` (shard_mode.h), so updates write the
  // parameters in place and a snapshot must copy them.
  ShardCore(ShardOptions options, metrics::RuntimeMetrics* metrics, bool lock_free);

  [[nodiscard]] bool done() const {
    return finished.load() || version.load() >= total_updates.load();
  }
  [[nodiscard]] bool is_member(int trainer) const {
    return members[static_cast<size_t>(trainer)].load();
  }
  [[nodiscard]] int64_t member_count() const;
  void set_member(int trainer, bool member);
  // Drops a member (logged and counted); it rejoins when it registers again.
  void evict(int trainer, const std::string& why);
  // One update with `grad`, computed on version `grad_version`, at rate `lr`.
  void apply(const torch::Tensor& grad, int64_t grad_version, double lr);
  // The current parameters (under mu, unless lock_free).
  [[nodiscard]] ParamsSnapshot snapshot(proto::DType dtype);
  // Answers `trainer` with the current parameters and notes whether it heard the job is done
  // (under mu).
  void answer(int trainer, proto::DType dtype, ParamsSnapshot* reply);
  void note_told(int trainer, const ParamsSnapshot& reply);  // under mu
  // Stripe 0 speaks for its PS in the progress metrics (every stripe counts its traffic).
  [[nodiscard]] bool reports_progress() const { return metrics != nullptr && options.stripe == 0; }
  void publish_state();
  // Whether `trainer` trains now (joined and a member), for the per-trainer metrics (under mu).
  void publish_trainer(int trainer);

  const ShardOptions options;
  const bool lock_free;
  const std::string name;  // "shard 1", "shard 1 stripe 2": for the log
  metrics::RuntimeMetrics* const metrics;

  mutable std::mutex mu;
  std::condition_variable changed;  // version, membership, queue or finish changed
  std::atomic<bool> initialized{false};
  std::atomic<int64_t> version{0};
  std::atomic<bool> finished{false};
  // Fixed at initialisation.
  uint64_t fingerprint = 0;
  int trainers = 0;  // the most there can be: master + workers
  // An elastic job's (0: a fixed job): only trainers that registered are members, and a
  // synchronous update takes at least this many (modes/sync.cpp).
  int min_trainers = 0;
  [[nodiscard]] bool elastic() const { return min_trainers > 0; }
  // Where an elastic synchronous job's plans are made: PS 0's first stripe.
  [[nodiscard]] bool plans() const { return options.index == 0 && options.stripe == 0; }
  // Set at initialisation; the master's plan replaces it when it registers (a resumed run that
  // trains longer than the checkpoint's said), read without `mu` by done().
  std::atomic<int64_t> total_updates{0};
  int64_t elements = 0;  // of all pieces
  std::vector<int64_t> piece_sizes;
  std::vector<int64_t> piece_offsets;
  // Holds the parameters, all pieces in one flat tensor so that an update is one pass however
  // many pieces there are; unless lock-free it writes them out of place, so a snapshot shares
  // the tensor instead of copying it.
  std::unique_ptr<ShardOptimizer> optimizer;
  // The newest snapshot, reused while the version stays (not when lock-free).
  ParamsSnapshot last_snapshot;
  // Membership (read without the lock when lock-free), written under mu.
  std::unique_ptr<std::atomic<bool>[]> members;
  // Which trainers have registered since a fresh start (all of them when the shard was
  // initialised mid-run), under mu: a synchronous job takes its first update with all of them.
  std::vector<bool> joined;
  [[nodiscard]] std::vector<int> not_joined() const;
  std::vector<bool> told_done;
  // An elastic job's trainers' last beats (epoch: none yet), under mu. A trainer that beat and
  // then fell silent for kBeatSilence is gone (killed, frozen, cut off), without waiting out the
  // timeout.
  // Ten beats: room for a trainer starved of CPU for a few seconds (as an all-reduce rank's).
  static constexpr std::chrono::seconds kBeatSilence{10};
  std::vector<Clock::time_point> last_beat;
  [[nodiscard]] bool beat_silent(int trainer, Clock::time_point now) const {
    const auto last = last_beat[static_cast<size_t>(trainer)];
    return last != Clock::time_point{} && now - last > kBeatSilence;
  }
  Clock::time_point finished_at;
};

}  // namespace cifar::ps
