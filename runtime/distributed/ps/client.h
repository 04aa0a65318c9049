// A trainer's connection to every PS shard (each stripe of each PS, on a connection of its own):
// register, initialise, push gradients and pull
// parameters in one round trip (all shards in parallel), gather state for checkpoints. Calls to
// an unreachable or restarting shard are retried with backoff for a bounded time.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/ps/call_pool.h"
#include "distributed/ps/layout.h"
#include "distributed/ps/membership.h"
#include "proto/ps.pb.h"
#include "security/certificates.h"

namespace grpc {
class ByteBuffer;
class Status;
}  // namespace grpc

namespace cifar::metrics {
class RuntimeMetrics;
}

namespace cifar::ps {

struct ClientOptions {
  std::vector<std::string> addresses;  // one per PS
  int stripes = 1;    // per PS (layout.h): the layout has addresses x stripes shards
  std::string token;  // sent as "authorization: Bearer <token>" when set
  // The job's TLS credentials: every channel is mutual TLS with them (none: plaintext).
  std::optional<security::JobCredentials> tls;
  int64_t max_message_bytes = int64_t{512} << 20;
  proto::DType wire_dtype = proto::FLOAT32;
  double retry_seconds = 120;  // give up on a shard unreachable this long
  double call_seconds = 120;   // deadline of one call (a sync round may wait for slow trainers)
  // Who calls, sent on every call (membership.h): a trainer that a newer incarnation replaced
  // is refused, and stops with train::Replaced. None: a trainer without an incarnation.
  std::optional<Member> member;
  // The incarnation expected of each PS, by index (membership.h; missing or 0: any): an older PS
  // is waited out as one that is down, for retry_seconds.
  std::vector<int64_t> ps_incarnations;
  // Where training stops, by the master's plan: sent when it registers (0: not this trainer's
  // to say). A PS that restored another total from a checkpoint takes this one.
  int64_t total_updates = 0;
};

// What a pull (or push-and-pull) brought back.
struct PullResult {
  int64_t version = 0;    // the newest shard version seen
  bool done = false;      // a shard says the job is done
  bool stopping = false;  // a shard's PS was asked to stop: its state must be saved now
  int64_t pushed_bytes = 0;
  int64_t pulled_bytes = 0;
  // An elastic synchronous job's (proto::ParamsReply): the next update's plan as PS 0 told it
  // (id 0: none), whether the step must be computed again, and the update's samples.
  proto::SyncPlan plan;
  bool redo = false;
  std::optional<proto::Samples> samples;
};

// What a push says besides its gradients: an elastic synchronous job's plan it follows, and the
// samples the gradients were computed on (a synchronous update's tally).
struct PushNote {
  proto::SyncPlan plan;
  proto::Samples samples;
};

class PsClient {
 public:
  // `metrics` may be null.
  PsClient(ClientOptions options, ShardLayout layout, metrics::RuntimeMetrics* metrics);
  ~PsClient();
  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;

  // Registers `trainer` with every shard. With `wait_until_initialized`, polls shards the master
  // has not initialised yet (up to retry_seconds).
  std::vector<proto::RegisterReply> register_trainer(int trainer, bool wait_until_initialized);
  // Sends each shard its Initialize request (one per shard, null entries skipped).
  void initialize(const std::vector<std::unique_ptr<proto::InitRequest>>& requests);

  // Pushes `grads` (one per layout parameter) computed on the parameters of the last exchange
  // and writes the shards' fresh parameters into `params`.
  PullResult push_pull(int trainer, const std::vector<torch::Tensor>& grads,
                       const std::vector<torch::Tensor>& params, double lr,
                       const PushNote& note = {});
  PullResult pull(int trainer, const std::vector<torch::Tensor>& params);
  // An elastic synchronous job's trainer that is in no plan (it joined, or was dropped): waits
  // until an update's plan holds it, then pulls every shard's parameters of that update.
  PullResult pull_when_planned(int trainer, const std::vector<torch::Tensor>& params);
  // An elastic job's trainer leaves (scaled down): no shard waits for it any more.
  void leave(int trainer);
  // One beat of an elastic synchronous job's trainer at PS 0's first stripe (no retry: the next
  // beat is the retry); whether it got there.
  bool beat(int trainer);
  std::vector<proto::StateReply> get_state();
  void finish();

  // Called (by the chief) when a shard turns out to be uninitialised mid-run, i.e. it restarted
  // without a checkpoint to restore: the handler re-initialises it.
  void on_shard_lost(std::function<void(int shard)> handler) {
    on_shard_lost_ = std::move(handler);
  }

  [[nodiscard]] const ShardLayout& layout() const { return layout_; }

 private:
  class Connection;
  void for_each_shard(const std::function<void(int)>& body);
  [[nodiscard]] proto::RegisterRequest register_request(int trainer, int shard) const;
  grpc::Status pull_shard(int trainer, int shard, grpc::ByteBuffer* reply,
                          const proto::PullRequest& wait = {});
  // Writes shard `shard`'s parameters into `params`; its version and done flag into `result`.
  void take_params(int shard, const grpc::ByteBuffer& reply,
                   const std::vector<torch::Tensor>& params, PullResult& result);

  ClientOptions options_;
  ShardLayout layout_;
  metrics::RuntimeMetrics* metrics_;
  std::vector<std::unique_ptr<Connection>> shards_;
  std::vector<int64_t> versions_;  // per shard: the version our parameters come from
  std::function<void(int)> on_shard_lost_;
  CallPool calls_;  // runs the calls to shards 1.. while this thread makes shard 0's
};

}  // namespace cifar::ps
