// hogwild (Project Adam / Hogwild style): no lock at all; concurrent pushes update the same
// memory in place and a reply is copied as it is, possibly mid-update.
#include "distributed/ps/shard_mode.h"

namespace cifar::ps {
namespace {

class HogwildMode final : public ShardMode {
 public:
  [[nodiscard]] bool lock_free() const override { return true; }

  ShardStatus push_pull(ShardCore& core, const Push& push, ShardCore::Lock& lock,
                        ParamsSnapshot* reply) override {
    core.apply(push.grad, push.version, push.learning_rate);
    *reply = core.snapshot(push.reply_dtype);
    if (reply->done) {
      lock.lock();  // who has heard the job is done is kept under the lock
      core.note_told(push.trainer, *reply);
    }
    return {};
  }
};

}  // namespace

std::unique_ptr<ShardMode> make_hogwild_mode() { return std::make_unique<HogwildMode>(); }

}  // namespace cifar::ps
