#include "distributed/allreduce/exchange.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <stdexcept>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <utility>

#include "distributed/allreduce/peer_lost.h"
#include "distributed/allreduce/peer_wait.h"
#include "distributed/allreduce/replicas.h"
#include "metrics/runtime_metrics.h"
#include "metrics/seconds_since.h"
#include "train/done_marker.h"

namespace cifar::allreduce {
using metrics::seconds_since;

AllReduceExchange::AllReduceExchange(const train::TrainConfig& config,
                                     c10::intrusive_ptr<c10d::ProcessGroup> group, int64_t round,
                                     BucketOptions options, train::Fence fence,
                                     std::optional<HeldState> held,
                                     std::function<bool()> must_reform)
    : LocalExchange(config, std::move(fence)),
      group_(std::move(group)),
      round_(round),
      options_(std::move(options)),
      verify_every_(config.distributed.allreduce.verify_replicas_every),
      held_(std::move(held)),
      must_reform_(std::move(must_reform)) {}

AllReduceExchange::~AllReduceExchange() = default;

int AllReduceExchange::rank() const { return group_->getRank(); }

train::TrainerPlace AllReduceExchange::place() const {
  return {rank(), group_->getSize(), rank() == 0, /*in_lockstep=*/true};
}

train::TrainState AllReduceExchange::start(const train::TrainableModel& model,
                                           const train::UpdatePlan& /*plan*/,
                                           metrics::RuntimeMetrics& metrics) {
  buffers_ = model.buffers;
  replica_ = model.parameters;
  replica_.insert(replica_.end(), buffers_.begin(), buffers_.end());
  prepare(model);
  const auto [newest, source] = newest_state();
  train::TrainState state;
  if (!newest.empty()) {
    state = resume_from_bytes(newest);
    spdlog::info("rank {}: resumed at step {} (epoch {}) from {}", rank(), state.step, state.epoch,
                 source);
  }
  // Fresh: rank 0's initial parameters for all. Resumed: already equal; the same call keeps it so.
  broadcast_coalesced(*group_, replica_, options_.wait);
  buckets_ = std::make_unique<GradientBuckets>(model.parameters, group_, options_, &metrics);
  metrics.set_allreduce_world(group_->getSize(), round_);
  spdlog::info("rank {}: {} gradient buckets ({} MB cap, first {} MB), overlap {}", rank(),
               buckets_->bucket_count(), options_.cap_bytes >> 20,
               static_cast<double>(options_.first_cap_bytes) / (1 << 20),
               options_.overlap ? "on" : "off");
  return state;
}

std::pair<std::string, std::string> AllReduceExchange::newest_state() {
  // The ranks left after a peer was lost hold, in memory, every step they completed: the newest
  // of those (the ranks may differ by the step in flight) is handed to all, so that nothing
  // trained is lost and nobody but its holder touches the checkpoints.
  const int holder = holder_of_newest(*group_, held_ ? held_->step : -1, options_.wait);
  if (holder >= 0) {
    auto bytes = broadcast_bytes(*group_, held_ ? held_->bytes : "", options_.wait, holder);
    held_.reset();
    return {std::move(bytes), "rank " + std::to_string(holder) + "'s memory (no checkpoint read)"};
  }
  // Nobody holds a state (the job's start, a suspend and resume): as a PS job does, a distributed
  // run always resumes (--resume or not): rank 0 reads the run's newest readable checkpoint, and
  // every rank restores those same bytes. So ranks that restarted agree on the step, the weights,
  // the optimizer's state and the RNG without any of them but rank 0 needing to see the
  // checkpoint volume.
  std::string newest;
  std::string source;
  if (rank() == 0) {
    if (auto found = checkpoints_of_run().newest_readable()) {
      source = " " + checkpoints_of_run().location_of(found->first);
      newest = std::move(found->second);
    }
  }
  return {broadcast_bytes(*group_, newest, options_.wait), "rank 0's newest checkpoint" + source};
}

void AllReduceExchange::committed(const train::TrainState& state) {
  const bool stepped = stepping_;
  committed_ = state;
  stepping_ = false;
  {
    // The next forward pass changes BatchNorm's running statistics before anything can fail:
    // what this rank holds is their value now (they are small).
    torch::NoGradGuard no_grad;
    committed_buffers_.clear();
    for (const auto& buffer : buffers_) committed_buffers_.push_back(buffer.clone());
  }
  // The replica check once the step is held, so that a rank lost in it leaves the others holding
  // the step rather than nothing (a model a step ahead of its counters).
  if (stepped && verify_every_ > 0 && state.step % verify_every_ == 0) {
    verify_replicas(*group_, replica_, state.step, options_.wait);
    ++verified_;
  }
}

std::optional<HeldState> AllReduceExchange::held_state() {
  if (!committed_ || stepping_) return std::nullopt;
  try {
    torch::NoGradGuard no_grad;  // the model trains no more in this group: its buffers go back
    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(committed_buffers_[i]);
    return HeldState{committed_->step, committed_->epoch, state_bytes(*committed_)};
  } catch (const std::exception& e) {  // then the group takes another rank's, or a checkpoint
    spdlog::warn("rank {}: what it trained cannot be kept for the next group: {}", rank(),
                 e.what());
    return std::nullopt;
  }
}

std::string AllReduceExchange::describe() const {
  return "all-reduce rank " + std::to_string(rank()) + " of " + std::to_string(group_->getSize()) +
         " (" + group_->getBackendName() + ")";
}

void AllReduceExchange::begin_backward() { buckets_->begin_backward(); }

train::UpdateResult AllReduceExchange::update(double lr, const train::SampleTally& trained) {
  const auto start = std::chrono::steady_clock::now();
  buckets_->end_backward();
  // Each rank's forward updated BatchNorm's running statistics from its own batch: all take
  // rank 0's, as PyTorch DDP's broadcast_buffers does.
  if (!buffers_.empty()) broadcast_coalesced(*group_, buffers_, options_.wait);
  const auto samples = sum_over_group(trained);
  const double communication = seconds_since(start);
  stepping_ = true;  // the model is a step ahead of the state until committed()
  auto result = LocalExchange::update(lr, trained);
  result.samples = samples;
  result.communication_seconds = communication;
  return result;
}

train::SampleTally AllReduceExchange::sum_over_group(const train::SampleTally& mine) {
  std::vector<torch::Tensor> sums{
      torch::tensor({mine.count, mine.index_sum, mine.index_square_sum}, torch::kInt64)};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  options.timeout = options_.wait.timeout;
  wait_for_peers(*group_, group_->allreduce(sums, options), options_.wait,
                 "sample-tally all-reduce");
  return {sums[0][0].item<int64_t>(), sums[0][1].item<int64_t>(), sums[0][2].item<int64_t>()};
}

bool AllReduceExchange::agree_to_stop(bool asked) {
  const auto start = std::chrono::steady_clock::now();
  const bool reform = rank() == 0 && must_reform_ && must_reform_();
  std::vector<torch::Tensor> flag{torch::tensor({asked ? 1 : 0, reform ? 1 : 0}, torch::kInt32)};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  options.timeout = options_.wait.timeout;
  wait_for_peers(*group_, group_->allreduce(flag, options), options_.wait,
                 "stop-request all-reduce");
  const bool stop = flag[0][0].item<int32_t>() != 0;
  stop_agreement_seconds_ += seconds_since(start);
  if (stop && !asked) spdlog::info("rank {}: another rank was asked to stop; stopping too", rank());
  if (!stop && flag[0][1].item<int32_t>() != 0) {
    throw ReformGroup("ranks wait to join, or the store moved on: the group of " +
                      std::to_string(group_->getSize()) + " forms again after step " +
                      std::to_string(committed_ ? committed_->step : 0));
  }
  return stop;
}

void AllReduceExchange::finish(const train::TrainState& state) {
  const auto& t = buckets_->totals();
  if (t.steps > 0) {
    const auto steps = static_cast<double>(t.steps);
    spdlog::info(
        "rank {}: all-reduce {:.2f} MB per step, in flight {:.1f} ms per step, of which {:.1f} "
        "ms waited after backward",
        rank(), static_cast<double>(t.bytes) / steps / 1e6, 1e3 * t.in_flight_seconds / steps,
        1e3 * t.wait_seconds / steps);
    spdlog::info("rank {}: the stop-request all-reduce took {:.3f} ms per step", rank(),
                 1e3 * stop_agreement_seconds_ / steps);
  }
  if (verify_every_ > 0) {
    spdlog::info("rank {}: replicas bit-identical at all {} checks (every {} steps)", rank(),
                 verified_, verify_every_);
  }
  if (rank() == 0) train::write_done_marker(config(), checkpoints_of_run().fence(), state.step);
}

}  // namespace cifar::allreduce
