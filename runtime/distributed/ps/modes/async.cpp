// async: each push is applied at once under the shard's lock, and its trainer gets the fresh
// parameters (apply, then reply).
#include "distributed/ps/shard_mode.h"

namespace cifar::ps {
namespace {

class AsyncMode final : public ShardMode {
 public:
  ShardStatus push_pull(ShardCore& core, const Push& push, ShardCore::Lock& /*lock*/,
                        ParamsSnapshot* reply) override {
    core.apply(push.grad, push.version, push.learning_rate);
    core.answer(push.trainer, push.reply_dtype, reply);
    return {};
  }
};

}  // namespace

std::unique_ptr<ShardMode> make_async_mode() { return std::make_unique<AsyncMode>(); }

}  // namespace cifar::ps
