// sync: every member's gradient for the version is summed; the last one in averages and applies
// them once, and every trainer of the round gets the same parameters. Equal to single-process
// training with the global batch. A member silent for --ps-timeout is dropped and the round
// goes on without it.
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

#include "distributed/ps/shard_mode.h"

namespace cifar::ps {
namespace {

class SyncMode final : public ShardMode {
 public:
  void on_initialized(ShardCore& core) override {
    round_sum_ = torch::zeros({core.elements});
    round_arrived_.assign(static_cast<size_t>(core.trainers), false);
  }

  ShardStatus push_pull(ShardCore& core, const Push& push, ShardCore::Lock& lock,
                        ParamsSnapshot* reply) override {
    if (push.version != core.version.load()) {
      return ShardStatus::retry("gradient for version " + std::to_string(push.version) +
                                " but the shard is at " + std::to_string(core.version.load()) +
                                ": pull again");
    }
    const auto slot = static_cast<size_t>(push.trainer);
    // A trainer that already pushed to this round is retrying: its gradient is in, it waits.
    if (!round_arrived_[slot]) {
      if (round_count_ == 0) {
        round_started_ = ShardCore::Clock::now();
        round_lr_ = push.learning_rate;
      }
      round_sum_.add_(push.grad);
      round_arrived_[slot] = true;
      ++round_count_;
    }
    const int64_t round_version = core.version.load();
    while (core.version.load() == round_version && !core.finished) {
      if (round_complete(core)) {
        complete_round(core);
        break;
      }
      if (core.changed.wait_until(lock, round_started_ + core.options.timeout) ==
              std::cv_status::timeout &&
          core.version.load() == round_version) {
        // Explicit, logged and counted: the round goes on without the silent members.
        for (int m = 0; m < core.trainers; ++m) {
          if (core.is_member(m) && !round_arrived_[static_cast<size_t>(m)]) {
            core.evict(m,
                       "no gradient for " + std::to_string(core.options.timeout.count()) + " ms");
          }
        }
      }
    }
    core.answer(push.trainer, push.reply_dtype, reply);
    return {};
  }

 private:
  [[nodiscard]] bool round_complete(const ShardCore& core) const {
    for (int m = 0; m < core.trainers; ++m) {
      if (core.is_member(m) && !round_arrived_[static_cast<size_t>(m)]) return false;
    }
    return true;
  }

  void complete_round(ShardCore& core) {
    core.apply(round_sum_ / static_cast<double>(round_count_), core.version.load(), round_lr_);
    round_sum_.zero_();
    std::fill(round_arrived_.begin(), round_arrived_.end(), false);
    round_count_ = 0;
    core.changed.notify_all();
  }

  torch::Tensor round_sum_;
  std::vector<bool> round_arrived_;
  int round_count_ = 0;
  double round_lr_ = 0;
  ShardCore::Clock::time_point round_started_;
};

}  // namespace

std::unique_ptr<ShardMode> make_sync_mode() { return std::make_unique<SyncMode>(); }

}  // namespace cifar::ps
