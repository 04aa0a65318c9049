// One PS shard's state and the five ways it applies pushed gradients (docs/ARCHITECTURE.md, "Parameter server"). The
// gRPC service (server.cpp) is a thin wrapper around it, so tests can also drive it directly.
#pragma once

#include <grpcpp/support/status.h>
#include <torch/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/ps/shard_optimizer.h"
#include "proto/ps.pb.h"

namespace cifar::metrics {
class RuntimeMetrics;
}

namespace cifar::ps {

// The message of the UNAVAILABLE status a shard answers before the master initialised it.
constexpr const char* kNotInitialized = "shard not initialized";

enum class Mode {
  kSync,        // wait for every trainer's gradient, average, apply once, answer all
  kAsync,       // apply each push at once under a lock, answer with the fresh parameters
  kAsyncReply,  // answer with the current parameters at once, apply the queued gradient after
  kHogwild,     // apply without any lock, answer at once
  kSsp,         // like async, but a trainer more than `staleness` pushes ahead of the slowest waits
};
Mode parse_mode(const std::string& name);  // throws std::invalid_argument
std::string mode_name(Mode mode);

// The parameters a reply carries, immutable and in the wire dtype, all pieces end to end: in
// float32 outside hogwild mode the shard's own tensor (updates replace it rather than write into
// it), else a copy. Shareable between replies (a sync round's trainers all get the same one) and
// sent without a copy.
struct ParamsSnapshot {
  int64_t version = 0;
  bool done = false;
  proto::DType dtype = proto::FLOAT32;
  torch::Tensor values;
  std::vector<int64_t> piece_sizes;
};

// The snapshot as a protobuf message (copies the bytes; for the rarely used Pull path and tests).
void to_proto(const ParamsSnapshot& snapshot, proto::ParamsReply* reply);

// A trainer's push, its gradient pieces already received end to end into one float32 tensor.
struct Push {
  int trainer = 0;
  int64_t version = 0;
  double learning_rate = 0;
  proto::DType reply_dtype = proto::DTYPE_UNSPECIFIED;
  torch::Tensor grad;
  int64_t wire_bytes = 0;  // as received, for the traffic metric
};

// The UNAVAILABLE status of a shard the master has not initialised yet.
grpc::Status not_initialized();

struct ShardOptions {
  int index = 0;   // the PS's index in the job
  int stripe = 0;  // of that PS (layout.h); stripe 0 reports the PS's version, members, updates

  Mode mode = Mode::kSync;
  int64_t staleness = 3;
  bool staleness_lr = false;
  std::chrono::milliseconds timeout{30000};
};

class Shard {
 public:
  // `metrics` may be null (tests).
  Shard(ShardOptions options, metrics::RuntimeMetrics* metrics);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  grpc::Status register_trainer(const proto::RegisterRequest& request, proto::RegisterReply* reply);
  grpc::Status initialize(const proto::InitRequest& request, proto::InitReply* reply);
  // `push.grad` holds piece_sizes() elements (wire_framing's read_push does that).
  grpc::Status push_pull(const Push& push, ParamsSnapshot* reply);
  grpc::Status pull(const proto::PullRequest& request, ParamsSnapshot* reply);
  grpc::Status get_state(proto::StateReply* reply);
  // The master ends the job: every later reply says done.
  void finish();

  [[nodiscard]] bool initialized() const { return initialized_.load(); }
  // The elements of each piece; fixed once initialized().
  [[nodiscard]] const std::vector<int64_t>& piece_sizes() const { return piece_sizes_; }
  [[nodiscard]] int64_t version() const { return version_.load(); }
  // Waits until the job is finished and every member has been told so, or `grace` has passed
  // since it finished (a member that died is not waited for forever).
  void wait_until_finished(std::chrono::milliseconds grace);

 private:
  struct PendingUpdate {
    int trainer = 0;
    int64_t version = 0;
    double lr = 0;
    torch::Tensor grad;
  };
  using Lock = std::unique_lock<std::mutex>;

  grpc::Status check_push(const Push& push) const;
  [[nodiscard]] bool done() const;
  [[nodiscard]] bool is_member(int trainer) const;
  [[nodiscard]] int64_t member_count() const;
  void set_member(int trainer, bool member);
  void apply(const torch::Tensor& grad, int64_t grad_version, double lr);
  void complete_round(Lock& lock);
  void evict(int trainer, const std::string& why);
  // The fewest pushes of any member but `except` (int64 max when there is none).
  [[nodiscard]] int64_t slowest_clock(int except = -1) const;
  // The current parameters (under mu_, except in hogwild mode).
  [[nodiscard]] ParamsSnapshot snapshot(proto::DType dtype);
  void note_told(int trainer, const ParamsSnapshot& reply);  // under mu_
  void run_applier();
  // Stripe 0 speaks for its PS in the progress metrics (every stripe counts its traffic).
  [[nodiscard]] bool reports_progress() const {
    return metrics_ != nullptr && options_.stripe == 0;
  }
  void publish_state();

  ShardOptions options_;
  std::string name_;  // "shard 1", "shard 1 stripe 2": for the log
  metrics::RuntimeMetrics* metrics_;

  mutable std::mutex mu_;
  std::condition_variable changed_;  // version, membership, queue or finish changed
  std::atomic<bool> initialized_{false};
  std::atomic<int64_t> version_{0};
  std::atomic<bool> finished_{false};
  // Fixed at initialisation.
  uint64_t fingerprint_ = 0;
  int trainers_ = 0;
  int64_t total_updates_ = 0;
  std::vector<int64_t> piece_sizes_;
  std::vector<int64_t> piece_offsets_;
  // Holds the parameters, all pieces in one flat tensor so that an update is one pass however
  // many pieces there are; outside hogwild mode it writes them out of place, so a snapshot shares
  // the tensor instead of copying it.
  std::unique_ptr<ShardOptimizer> optimizer_;
  // The newest snapshot, reused while the version stays (not in hogwild mode).
  ParamsSnapshot last_snapshot_;
  // Membership (read without the lock in hogwild mode), written under mu_.
  std::unique_ptr<std::atomic<bool>[]> members_;
  std::vector<bool> told_done_;
  std::chrono::steady_clock::time_point finished_at_;
  // sync: the open round.
  torch::Tensor round_sum_;
  std::vector<bool> round_arrived_;
  int round_count_ = 0;
  double round_lr_ = 0;
  std::chrono::steady_clock::time_point round_started_;
  // ssp: pushes per trainer.
  std::vector<int64_t> clocks_;
  // async-reply: gradients waiting for the applier thread.
  std::deque<PendingUpdate> pending_;
  bool stopping_ = false;
  std::thread applier_;  // async-reply, from initialisation on
};

}  // namespace cifar::ps
