// async-reply: the trainer gets the current parameters at once and its gradient is queued; an
// applier thread applies the queue in order (reply, then apply). The queue is bounded, so a
// slow applier holds the trainers back instead of growing memory.
#include <algorithm>
#include <deque>
#include <thread>

#include "distributed/ps/shard_mode.h"

namespace cifar::ps {
namespace {

class AsyncReplyMode final : public ShardMode {
 public:
  // A PS holds stripes it may never use (layout.h): only a used one gets an applier thread.
  void on_initialized(ShardCore& core) override {
    applier_ = std::thread([this, &core] { run_applier(core); });
  }

  ShardStatus push_pull(ShardCore& core, const Push& push, ShardCore::Lock& lock,
                        ParamsSnapshot* reply) override {
    const auto max_pending = static_cast<size_t>(std::max(2, core.trainers));
    core.changed.wait(lock, [&] { return pending_.size() < max_pending || stopping_; });
    core.answer(push.trainer, push.reply_dtype, reply);
    // The gradient is the push's own tensor (received into it, not into gRPC's buffers).
    pending_.push_back({push.version, push.learning_rate, push.grad});
    core.changed.notify_all();
    return {};
  }

  void stop(ShardCore& core) override {
    {
      const std::lock_guard<std::mutex> lock(core.mu);
      stopping_ = true;
    }
    core.changed.notify_all();
    if (applier_.joinable()) applier_.join();
  }

 private:
  struct PendingUpdate {
    int64_t version = 0;
    double lr = 0;
    torch::Tensor grad;
  };

  void run_applier(ShardCore& core) {
    ShardCore::Lock lock(core.mu);
    while (true) {
      core.changed.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping
      const auto update = std::move(pending_.front());
      pending_.pop_front();
      if (!core.done()) core.apply(update.grad, update.version, update.lr);
      core.changed.notify_all();
    }
  }

  std::deque<PendingUpdate> pending_;
  bool stopping_ = false;
  std::thread applier_;
};

}  // namespace

std::unique_ptr<ShardMode> make_async_reply_mode() { return std::make_unique<AsyncReplyMode>(); }

}  // namespace cifar::ps
