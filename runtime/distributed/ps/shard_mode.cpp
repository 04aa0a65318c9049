#include "distributed/ps/shard_mode.h"

namespace cifar::ps {

std::unique_ptr<ShardMode> make_shard_mode(Mode mode) {
  switch (mode) {
    case Mode::kSync:
      return make_sync_mode();
    case Mode::kAsync:
      return make_async_mode();
    case Mode::kAsyncReply:
      return make_async_reply_mode();
    case Mode::kHogwild:
      return make_hogwild_mode();
    case Mode::kSsp:
      return make_ssp_mode();
  }
  return make_sync_mode();
}

}  // namespace cifar::ps
