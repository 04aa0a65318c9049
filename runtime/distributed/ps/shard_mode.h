// The five ways a shard applies pushed gradients (docs/ARCHITECTURE.md, "Parameter server"),
// behind one small interface; each mode is a file of modes/. What they share (parameters,
// version, members, the lock) is the ShardCore they are handed.
#pragma once

#include <memory>
#include <string>

#include "distributed/ps/shard_core.h"
#include "distributed/ps/shard_messages.h"
#include "distributed/ps/shard_status.h"

namespace cifar::ps {

class ShardMode {
 public:
  virtual ~ShardMode() = default;

  // Whether pushes are served without the shard's lock (lock-free, Hogwild style).
  [[nodiscard]] virtual bool lock_free() const { return false; }
  // The shard got its parameters (under the lock): size per-trainer state, start threads.
  virtual void on_initialized(ShardCore& /*core*/) {}
  // `trainer` registered, or registered again after it was dropped (under the lock).
  virtual void on_register(ShardCore& /*core*/, int /*trainer*/) {}
  // An elastic job's `trainer` left, or was dropped (under the lock).
  virtual void on_leave(ShardCore& /*core*/, int /*trainer*/) {}
  // An elastic synchronous job's plan of the current update, as `trainer` is told it (id 0:
  // none yet, or not a mode with plans); under the lock.
  [[nodiscard]] virtual proto::SyncPlan plan_for(const ShardCore& /*core*/, int /*trainer*/) const {
    return {};
  }
  // A checked push of a member while the job is not done: applies it in this mode's way and
  // answers `*reply`. `lock` holds core.mu, unless lock_free().
  virtual ShardStatus push_pull(ShardCore& core, const Push& push, ShardCore::Lock& lock,
                                ParamsSnapshot* reply) = 0;
  // The shard is going: stop what on_initialized started.
  virtual void stop(ShardCore& /*core*/) {}
};

std::unique_ptr<ShardMode> make_shard_mode(Mode mode);

// One factory per file of modes/.
std::unique_ptr<ShardMode> make_sync_mode();
std::unique_ptr<ShardMode> make_async_mode();
std::unique_ptr<ShardMode> make_async_reply_mode();
std::unique_ptr<ShardMode> make_hogwild_mode();
std::unique_ptr<ShardMode> make_ssp_mode();

}  // namespace cifar::ps
