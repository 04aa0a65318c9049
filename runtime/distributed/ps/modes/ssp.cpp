// ssp (stale synchronous parallel): like async, but a trainer more than --staleness pushes ahead
// of the slowest member waits for it; a member that stays that far behind for --ps-timeout is
// dropped, so one dead trainer cannot stop the others.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "distributed/ps/shard_mode.h"

namespace cifar::ps {
namespace {

class SspMode final : public ShardMode {
 public:
  void on_initialized(ShardCore& core) override {
    clocks_.assign(static_cast<size_t>(core.trainers), 0);
  }

  // A (re)joining trainer starts level with the slowest member, so nobody waits for it.
  void on_register(ShardCore& core, int trainer) override {
    const int64_t slowest = slowest_clock(core, /*except=*/trainer);
    clocks_[static_cast<size_t>(trainer)] =
        slowest == std::numeric_limits<int64_t>::max() ? 0 : slowest;
  }

  ShardStatus push_pull(ShardCore& core, const Push& push, ShardCore::Lock& lock,
                        ParamsSnapshot* reply) override {
    const int t = push.trainer;
    core.apply(push.grad, push.version, push.learning_rate);
    auto& clock = clocks_[static_cast<size_t>(t)];
    ++clock;
    core.changed.notify_all();
    const auto staleness = core.options.staleness;
    const auto deadline = ShardCore::Clock::now() + core.options.timeout;
    while (!core.done() && core.is_member(t) && clock - slowest_clock(core) > staleness) {
      if (core.changed.wait_until(lock, deadline) == std::cv_status::timeout) {
        const int64_t slowest = slowest_clock(core);
        for (int m = 0; m < core.trainers; ++m) {
          if (m != t && core.is_member(m) && clocks_[static_cast<size_t>(m)] == slowest) {
            core.evict(m, "more than " + std::to_string(staleness) + " updates behind for " +
                              std::to_string(core.options.timeout.count()) + " ms");
          }
        }
      }
    }
    core.answer(t, push.reply_dtype, reply);
    return {};
  }

 private:
  // The fewest pushes of any member but `except` (int64 max when there is none).
  [[nodiscard]] int64_t slowest_clock(const ShardCore& core, int except = -1) const {
    int64_t slowest = std::numeric_limits<int64_t>::max();
    for (int t = 0; t < core.trainers; ++t) {
      if (t != except && core.is_member(t)) {
        slowest = std::min(slowest, clocks_[static_cast<size_t>(t)]);
      }
    }
    return slowest;
  }

  std::vector<int64_t> clocks_;  // pushes per trainer
};

}  // namespace

std::unique_ptr<ShardMode> make_ssp_mode() { return std::make_unique<SspMode>(); }

}  // namespace cifar::ps
