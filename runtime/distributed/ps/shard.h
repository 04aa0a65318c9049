// One PS shard: the calls every mode answers alike (register, initialise, pull, state, finish)
// over the state they share (shard_core.h), and pushes handed to its mode (shard_mode.h, one file
// per mode in modes/). Free of the transport: the gRPC service (server.cpp) maps its ShardStatus
// to gRPC's, and tests can drive it directly.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/ps/shard_core.h"
#include "distributed/ps/shard_messages.h"
#include "distributed/ps/shard_status.h"
#include "proto/ps.pb.h"

namespace cifar::metrics {
class RuntimeMetrics;
}

namespace cifar::ps {

class ShardMode;

class Shard {
 public:
  // `metrics` may be null (tests).
  Shard(ShardOptions options, metrics::RuntimeMetrics* metrics);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  ShardStatus register_trainer(const proto::RegisterRequest& request, proto::RegisterReply* reply);
  ShardStatus initialize(const proto::InitRequest& request, proto::InitReply* reply);
  // `push.grad` holds piece_sizes() elements (wire_framing's read_push does that).
  ShardStatus push_pull(const Push& push, ParamsSnapshot* reply);
  ShardStatus pull(const proto::PullRequest& request, ParamsSnapshot* reply);
  ShardStatus get_state(proto::StateReply* reply);
  // An elastic job's trainer leaves: no update waits for it from now on.
  ShardStatus leave(const proto::LeaveRequest& request);
  // An elastic job's trainer says it is alive (ShardCore::beat_silent).
  ShardStatus beat(int trainer);
  // The master ends the job: every later reply says done.
  void finish();

  [[nodiscard]] bool initialized() const { return core_.initialized.load(); }
  // The elements of each piece; fixed once initialized().
  [[nodiscard]] const std::vector<int64_t>& piece_sizes() const { return core_.piece_sizes; }
  [[nodiscard]] int64_t version() const { return core_.version.load(); }
  [[nodiscard]] bool finished() const { return core_.finished.load(); }
  // The version of the state get_state last answered with, -1 before any: a PS asked to stop
  // waits until the master holds its state at the version it stopped at.
  [[nodiscard]] int64_t gathered_version() const { return gathered_version_.load(); }
  // Waits until the job is finished and every member has been told so, or `grace` has passed
  // since it finished (a member that died is not waited for forever).
  void wait_until_finished(std::chrono::milliseconds grace);

 private:
  [[nodiscard]] ShardStatus check_push(const Push& push) const;
  // Sync and SSP: holds a push until every trainer has joined, or answers kWaiting after the
  // timeout (under mu).
  ShardStatus wait_for_every_trainer(ShardCore::Lock& lock);

  std::unique_ptr<ShardMode> mode_;  // first: the core is built knowing whether it is lock-free
  ShardCore core_;
  std::atomic<int64_t> gathered_version_{-1};
  bool said_waiting_ = false;  // under mu
};

}  // namespace cifar::ps
